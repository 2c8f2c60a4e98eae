// A tiny random Qwen3.5 exported to GGUF (`qwen35`, llama.cpp's layout) and loaded back with
// loadModel(.gguf): every tensor comes back (value heads regrouped, norms, A_log, the conv kernel's
// shape), and the loaded model gives the Hugging Face original's greedy tokens and logits — f32 and
// bf16 exactly where only bits move, q8_0 within its quantisation error. Also a file as llama.cpp's
// converter writes it (multi-token-prediction blocks appended) and unsupported tensor types.
// No llama.cpp needed: llama-cpp-qwen35.test.ts checks the same export in llama.cpp itself.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  GgufError,
  GgufFile,
  type GgufTensorInput,
  type TensorData,
  applyQwen35Change,
  exportModelToGguf,
  fromFloat32,
  ggmlTypeId,
  ggufEncode,
  ggufValue,
  planGgufToHf,
  qwen35TensorChange,
  serializeSafetensors,
  toFloat32,
  writeGgufFile,
  writeRepoFiles,
} from "@kiln/hub-io";
import { Rng, noGrad } from "@kiln/tensor";
import { afterAll, describe, expect, it } from "vitest";
import { type Model, generate, loadModel, loadStories260K, parseDecoderConfig } from "../src/index.js";
import { randomTensors } from "../src/random-init.js";

const tmp = mkdtempSync(join(tmpdir(), "kiln-gguf-qwen35-import-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** More value heads than key heads (so the tiled ↔ grouped reorder shows), partial RoPE, 4 layers. */
const CONFIG = {
  architectures: ["Qwen3_5ForCausalLM"],
  model_type: "qwen3_5_text",
  vocab_size: 512,
  hidden_size: 64,
  intermediate_size: 96,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  hidden_act: "silu",
  rms_norm_eps: 1e-6,
  max_position_embeddings: 256,
  linear_conv_kernel_dim: 4,
  linear_key_head_dim: 16,
  linear_value_head_dim: 16,
  linear_num_key_heads: 2,
  linear_num_value_heads: 4,
  full_attention_interval: 2,
  rope_parameters: { rope_type: "default", rope_theta: 10000, partial_rotary_factor: 0.5 },
  tie_word_embeddings: false,
  bos_token_id: 1,
  eos_token_id: 2,
};
const PROMPTS = [
  [1, 403, 407, 261, 378],
  [1, 18, 300, 77, 401, 9, 260, 511, 3, 42, 42, 100, 250, 7],
];
const STEPS = 16;

/** Seeded weights, norms and dt_bias moved off their init values; matrices stored as `dtype`. */
function weights(dtype: "F32" | "BF16"): Map<string, TensorData> {
  const rng = new Rng(5);
  const out = new Map<string, TensorData>();
  for (const [name, t] of randomTensors(parseDecoderConfig(CONFIG), { seed: 3, std: 0.15 })) {
    let v = t.toFloat32Array();
    if (name.endsWith("norm.weight")) {
      const u = rng.uniform(v.length);
      v = v.map((x, i) => x + 0.4 * (u[i] - 0.5));
    }
    if (name.endsWith(".dt_bias")) v = v.map((x) => x - 1.5);
    const d = t.shape.length === 2 ? dtype : "F32";
    out.set(name, { dtype: d, shape: [...t.shape], data: fromFloat32(v, d) });
  }
  return out;
}

async function writeHf(dir: string, w: Map<string, TensorData>): Promise<void> {
  const { files } = await loadStories260K();
  const repo = new Map(files);
  repo.set("config.json", new TextEncoder().encode(JSON.stringify(CONFIG)));
  repo.set("model.safetensors", serializeSafetensors(w, { format: "pt" }));
  await writeRepoFiles(dir, repo);
}

function run(model: Model, ids: number[]): { greedy: number[]; logits: Float32Array } {
  const [out] = generate(model, [ids], { greedy: true, maxNewTokens: STEPS, stopTokenIds: [] });
  return { greedy: out.tokenIds, logits: noGrad(() => model.forward([ids])).toFloat32Array() };
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

/** The imported tensors (HF names) as f32, for comparing with the originals. */
async function imported(path: string, dtype: "f32" | "bf16" = "f32"): Promise<Map<string, TensorData>> {
  const plan = await planGgufToHf(path, { dtype });
  try {
    const out = new Map<string, TensorData>();
    for (const [name, t] of plan.tensors) {
      const data = await (t.data as () => Promise<Uint8Array>)();
      out.set(name, { dtype: t.dtype as TensorData["dtype"], shape: [...t.shape], data });
    }
    return out;
  } finally {
    await plan.file.close();
  }
}

const f32 = (t: TensorData) => toFloat32(t);

describe("Qwen3.5 GGUF (qwen35) import", () => {
  it("f32: every tensor back bit for bit (norms as the 1 + w the model uses, A_log to f32 rounding), same tokens and logits", async () => {
    const dir = join(tmp, "f32");
    const w = weights("F32");
    await writeHf(dir, w);
    const path = join(tmp, "f32.gguf");
    await exportModelToGguf(dir, path);
    const back = await imported(path);
    expect([...back.keys()].sort()).toEqual([...w.keys()].sort());
    for (const [name, t] of w) {
      const got = back.get(name) as TensorData;
      expect(got.shape, name).toEqual(t.shape);
      if (name.endsWith(".A_log")) {
        const want = f32(t);
        const g = f32(got);
        for (let i = 0; i < want.length; i++) expect(Math.abs(g[i] - want[i]), name).toBeLessThan(1e-6);
      } else if (name.endsWith("norm.weight") && !name.endsWith("linear_attn.norm.weight")) {
        expect(
          Float32Array.from(f32(got), (x) => x + 1),
          name,
        ).toEqual(Float32Array.from(f32(t), (x) => x + 1));
      } else {
        expect(got.dtype, name).toBe("F32");
        expect(Buffer.from(got.data).equals(Buffer.from(t.data)), name).toBe(true);
      }
    }
    const hf = await loadModel(dir);
    const gguf = await loadModel(path);
    expect(gguf.config.layerTypes).toEqual(hf.config.layerTypes);
    expect(gguf.config.partialRotaryFactor).toBe(0.5);
    expect(gguf.config.linearAttention).toEqual(hf.config.linearAttention);
    let worst = 0;
    for (const ids of PROMPTS) {
      const a = run(hf, ids);
      const b = run(gguf, ids);
      expect(b.greedy).toEqual(a.greedy);
      worst = Math.max(worst, maxAbsDiff(a.logits, b.logits));
    }
    process.stderr.write(`qwen35 gguf f32 import: worst |Δ logit| = ${worst.toExponential(2)}\n`);
    // Only A_log differs (log(exp(x)) in f32): a few ulps in the decay.
    expect(worst).toBeLessThan(1e-4);
  }, 120_000);

  it("bf16: matrices keep their bf16 bits, and a bf16 load gives the original's tokens and logits", async () => {
    const dir = join(tmp, "bf16");
    const w = weights("BF16");
    await writeHf(dir, w);
    const path = join(tmp, "bf16.gguf");
    await exportModelToGguf(dir, path, { dtype: "bf16" });
    const back = await imported(path, "bf16");
    for (const [name, t] of w) {
      if (t.dtype !== "BF16") continue;
      const got = back.get(name) as TensorData;
      expect(got.dtype, name).toBe("BF16");
      expect(Buffer.from(got.data).equals(Buffer.from(t.data)), name).toBe(true);
    }
    const hf = await loadModel(dir, { dtype: "bf16" });
    const gguf = await loadModel(path, { dtype: "bf16" });
    let worst = 0;
    for (const ids of PROMPTS) {
      const a = run(hf, ids);
      const b = run(gguf, ids);
      expect(b.greedy).toEqual(a.greedy);
      worst = Math.max(worst, maxAbsDiff(a.logits, b.logits));
    }
    process.stderr.write(`qwen35 gguf bf16 import: worst |Δ logit| = ${worst.toExponential(2)}\n`);
    expect(worst).toBeLessThan(1e-4);
  }, 120_000);

  it("q8_0: every matrix within half a quantisation step per block (plus d's f16 rounding)", async () => {
    const dir = join(tmp, "q8");
    const w = weights("F32");
    await writeHf(dir, w);
    const path = join(tmp, "q8.gguf");
    const report = await exportModelToGguf(dir, path, { dtype: "q8_0" });
    expect(report.tensors.filter((t) => t.type === "Q8_0").length).toBeGreaterThan(10);
    const back = await imported(path);
    let quantised = 0;
    for (const [name, t] of w) {
      if (t.shape.length !== 2) continue;
      // Blocks are 32 values of a row as the GGUF stores it: value heads in llama.cpp's tiled order.
      const change = qwen35TensorChange(name, CONFIG) ?? {};
      const want = applyQwen35Change(f32(t), t.shape, change);
      const got = applyQwen35Change(f32(back.get(name) as TensorData), t.shape, change);
      for (let b = 0; b < want.length; b += 32) {
        const block = want.subarray(b, b + 32);
        const d = Math.max(...block.map(Math.abs)) / 127;
        for (let i = 0; i < block.length; i++)
          expect(Math.abs(got[b + i] - block[i]), name).toBeLessThanOrEqual(d / 2 + 127 * d * 2 ** -11 + 1e-9);
      }
      quantised++;
    }
    expect(quantised).toBeGreaterThan(10);
    // The loaded model is exactly the Hugging Face model of the dequantised weights …
    const deq = join(tmp, "q8-dequantised");
    await writeHf(deq, back);
    const gguf = await loadModel(path);
    const a = run(await loadModel(deq), PROMPTS[0]);
    const b = run(gguf, PROMPTS[0]);
    expect(b.greedy).toEqual(a.greedy);
    expect(maxAbsDiff(a.logits, b.logits)).toBe(0);
    // … and near the original: this random net's logits have rms 1.2; f16 storage moves them by
    // 0.01 at worst, q8_0 (a step of max|block|/127) by 0.57, measured.
    const worst = maxAbsDiff(run(await loadModel(dir), PROMPTS[0]).logits, b.logits);
    process.stderr.write(`qwen35 gguf q8_0 import: worst |Δ logit| vs the f32 original = ${worst.toExponential(2)}\n`);
    expect(worst).toBeGreaterThan(0);
    expect(worst).toBeLessThan(1);
  }, 120_000);

  it("a file as llama.cpp's converter writes it: appended multi-token-prediction blocks are left out, with a note", async () => {
    const dir = join(tmp, "mtp");
    await writeHf(dir, weights("F32"));
    const plain = join(tmp, "mtp-plain.gguf");
    await exportModelToGguf(dir, plain);
    const src = await GgufFile.open(plain);
    const withMtp = join(tmp, "mtp.gguf");
    try {
      const meta = new Map(src.metadata);
      meta.set("qwen35.block_count", ggufValue.u32(5));
      meta.set("qwen35.nextn_predict_layers", ggufValue.u32(1));
      const tensors: GgufTensorInput[] = src.tensors.map((t) => ({
        name: t.name,
        type: t.type,
        shape: t.shape,
        data: () => src.raw(t.name),
      }));
      // convert_hf_to_gguf.py's _QwenMtpMixin: mtp.fc → blk.N.nextn.eh_proj, pre_fc_norm_* → enorm/hnorm,
      // and the MTP layer's own attention tensors under the same block index.
      const h = CONFIG.hidden_size;
      tensors.push(
        {
          name: "blk.4.nextn.eh_proj.weight",
          type: "F32",
          shape: [h, 2 * h],
          data: ggufEncode(new Float32Array(2 * h * h), "F32"),
        },
        { name: "blk.4.nextn.enorm.weight", type: "F32", shape: [h], data: ggufEncode(new Float32Array(h), "F32") },
        { name: "blk.4.attn_norm.weight", type: "F32", shape: [h], data: ggufEncode(new Float32Array(h), "F32") },
      );
      await writeGgufFile(withMtp, meta, tensors);
    } finally {
      await src.close();
    }
    const plan = await planGgufToHf(withMtp);
    expect(plan.config.num_hidden_layers).toBe(4);
    expect(plan.notes.join(" ")).toMatch(/3 multi-token-prediction tensors/);
    expect([...plan.tensors.keys()].some((n) => n.includes("layers.4."))).toBe(false);
    await plan.file.close();
    const a = run(await loadModel(plain), PROMPTS[0]);
    const b = run(await loadModel(withMtp), PROMPTS[0]);
    expect(b.greedy).toEqual(a.greedy);
    expect(maxAbsDiff(a.logits, b.logits)).toBe(0);
  }, 120_000);

  it("a tensor type kiln does not dequantise is a GgufError naming the tensor and the type", async () => {
    const dir = join(tmp, "q4");
    await writeHf(dir, weights("F32"));
    const plain = join(tmp, "q4-plain.gguf");
    await exportModelToGguf(dir, plain);
    const src = await GgufFile.open(plain);
    const q4 = join(tmp, "q4.gguf");
    try {
      const tensors: GgufTensorInput[] = src.tensors.map((t) =>
        t.name === "blk.0.ssm_out.weight"
          ? { name: t.name, type: "Q4_0", shape: t.shape, data: new Uint8Array((t.shape[0] * t.shape[1] * 18) / 32) }
          : { name: t.name, type: t.type, shape: t.shape, data: () => src.raw(t.name) },
      );
      await writeGgufFile(q4, new Map(src.metadata), tensors);
    } finally {
      await src.close();
    }
    expect(ggmlTypeId("Q4_0")).toBe(2);
    const err = await loadModel(q4).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GgufError);
    expect((err as Error).message).toMatch(/blk\.0\.ssm_out\.weight/);
    expect((err as Error).message).toMatch(/Q4_0/);
  }, 120_000);
});
