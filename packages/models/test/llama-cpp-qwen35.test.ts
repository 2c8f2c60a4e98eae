// A tiny random Qwen3.5 (Gated DeltaNet + gated attention, more value heads than key heads, partial
// RoPE, random zero-centred norms) written by kiln's GGUF export and run in llama.cpp's `qwen35`
// (node-llama-cpp 3.21.1's prebuilt CPU build): the same greedy tokens as kiln, and next-token
// log-probs within QWEN35_LOGPROB_TOLERANCE (llama.cpp's f32 CPU kernels sum in another order and run
// the delta rule chunked; F32 KV cache, no flash attention). Where node-llama-cpp does not load, the
// suite says so in one line and is skipped; KILN_LLAMA_CPP=required makes that a failure.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgufFile, type TensorData, exportModelToGguf, serializeSafetensors, writeRepoFiles } from "@kiln/hub-io";
import { Rng, noGrad } from "@kiln/tensor";
import { afterAll, describe, expect, it } from "vitest";
import {
  type LlamaCppHandle,
  type Model,
  generate,
  loadLlamaCpp,
  loadModel,
  loadStories260K,
  parseDecoderConfig,
} from "../src/index.js";
import { randomTensors } from "../src/random-init.js";

const required = process.env.KILN_LLAMA_CPP === "required";
let llama: LlamaCppHandle | undefined;
let unavailable: string | null = null;
try {
  llama = await loadLlamaCpp();
} catch (e) {
  unavailable = (e as Error).message;
}
if (unavailable) process.stderr.write(`llama.cpp tests skipped: ${unavailable}\n`);

// Measured worst |Δ log p| 2e-5 over these prompts (1.4e-4 on a variant with as many value as key heads).
const QWEN35_LOGPROB_TOLERANCE = 5e-4;
const STEPS = 24;
const tmp = mkdtempSync(join(tmpdir(), "kiln-llama-qwen35-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Qwen3.5 text config at toy size; the stories260K vocabulary (512) gives llama.cpp a tokenizer. */
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

/** Seeded weights with norms, decay and gates away from their init values (so each conversion shows). */
function weights(): Map<string, TensorData> {
  const rng = new Rng(5);
  const out = new Map<string, TensorData>();
  for (const [name, t] of randomTensors(parseDecoderConfig(CONFIG), { seed: 3, std: 0.15 })) {
    let v = t.toFloat32Array();
    if (name.endsWith("norm.weight")) {
      const u = rng.uniform(v.length);
      v = v.map((x, i) => x + 0.4 * (u[i] - 0.5));
    }
    if (name.endsWith(".dt_bias")) v = v.map((x) => x - 1.5);
    out.set(name, { dtype: "F32", shape: [...t.shape], data: new Uint8Array(v.buffer) });
  }
  return out;
}

function logSoftmax(logits: Float32Array): Float64Array {
  let max = Number.NEGATIVE_INFINITY;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (v) => v - lse);
}

type NlcModel = Awaited<ReturnType<LlamaCppHandle["loadModel"]>>;
interface ControlledSeq {
  controlledEvaluate(input: unknown[]): Promise<({ next: { probabilities?: Map<number, number> } } | undefined)[]>;
}
interface NlcSeq {
  evaluate(tokens: number[], o: { temperature: number; yieldEogToken?: boolean }): AsyncGenerator<number>;
  clearHistory(): Promise<void>;
}

async function llamaCppRun(model: NlcModel, ids: number[]): Promise<{ greedy: number[]; probs: Map<number, number> }> {
  const ctx = await (
    model as unknown as { createContext(o: unknown): Promise<{ getSequence(): NlcSeq; dispose(): Promise<void> }> }
  ).createContext({
    contextSize: 128,
    threads: 1,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
    flashAttention: false,
  });
  const seq = ctx.getSequence();
  const greedy: number[] = [];
  for await (const t of seq.evaluate(ids, { temperature: 0, yieldEogToken: true })) {
    greedy.push(t);
    if (greedy.length === STEPS) break;
  }
  await seq.clearHistory();
  const input: unknown[] = ids.map((t, i) =>
    i === ids.length - 1
      ? [t, { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } }]
      : t,
  );
  const res = await (seq as unknown as ControlledSeq).controlledEvaluate(input);
  await ctx.dispose();
  return { greedy, probs: res[ids.length - 1]?.next.probabilities ?? new Map() };
}

function kilnRun(model: Model, ids: number[]): { greedy: number[]; logprobs: Float64Array } {
  const [out] = generate(model, [ids], { greedy: true, maxNewTokens: STEPS, stopTokenIds: [] });
  const logits = noGrad(() => model.forward([ids], { logitsToKeep: 1 })).toFloat32Array();
  return { greedy: out.tokenIds, logprobs: logSoftmax(logits) };
}

const PROMPTS = [
  [1, 403, 407, 261, 378],
  [1, 18, 300, 77, 401, 9, 260, 511, 3, 42, 42, 100, 250, 7],
  [1, ...Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 512)],
];

describe("llama.cpp availability (qwen35)", () => {
  it.runIf(required)("node-llama-cpp loads (KILN_LLAMA_CPP=required)", () => {
    expect(unavailable).toBeNull();
  });
});

describe("Qwen3.5 GGUF layout (no llama.cpp needed)", () => {
  it("writes llama.cpp's qwen35 keys and tensor names, norms as 1 + w, A as −exp(A_log), value heads tiled", async () => {
    const dir = join(tmp, "layout");
    const { files } = await loadStories260K();
    const w = weights();
    const repo = new Map(files);
    repo.set("config.json", new TextEncoder().encode(JSON.stringify(CONFIG)));
    repo.set("model.safetensors", serializeSafetensors(w, { format: "pt" }));
    await writeRepoFiles(dir, repo);
    const path = join(tmp, "layout.gguf");
    await exportModelToGguf(dir, path);
    const file = await GgufFile.open(path);
    try {
      expect(file.get("general.architecture")).toBe("qwen35");
      expect(file.get("qwen35.ssm.conv_kernel")).toBe(4);
      expect(file.get("qwen35.ssm.state_size")).toBe(16);
      expect(file.get("qwen35.ssm.group_count")).toBe(2);
      expect(file.get("qwen35.ssm.time_step_rank")).toBe(4);
      expect(file.get("qwen35.ssm.inner_size")).toBe(64);
      expect(file.get("qwen35.full_attention_interval")).toBe(2);
      expect(file.get("qwen35.rope.dimension_count")).toBe(8);
      expect(file.get("qwen35.rope.dimension_sections")).toEqual([2, 1, 1, 0]);
      const names = file.tensors.map((t) => t.name);
      for (const n of ["attn_qkv.weight", "attn_gate.weight", "ssm_a", "ssm_dt.bias", "ssm_conv1d.weight"])
        expect(names).toContain(`blk.0.${n}`);
      expect(names).toContain("blk.1.post_attention_norm.weight");
      expect(names).toContain("blk.1.attn_q.weight");
      const conv = file.tensors.find((t) => t.name === "blk.0.ssm_conv1d.weight");
      expect(conv?.shape).toEqual([2 * 32 + 64, 4]);
      expect(conv?.type).toBe("F32");
      const f32 = async (n: string) => {
        const raw = await file.raw(n);
        return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
      };
      const hf = (n: string) => {
        const d = w.get(n) as TensorData;
        return new Float32Array(d.data.buffer.slice(d.data.byteOffset, d.data.byteOffset + d.data.byteLength));
      };
      const norm = hf("model.layers.0.input_layernorm.weight");
      expect(await f32("blk.0.attn_norm.weight")).toEqual(norm.map((x) => x + 1));
      // The gated output norm is a plain weight (no + 1).
      expect(await f32("blk.0.ssm_norm.weight")).toEqual(hf("model.layers.0.linear_attn.norm.weight"));
      // 2 key heads, 4 value heads: grouped [g0v0, g0v1, g1v0, g1v1] → tiled [g0v0, g1v0, g0v1, g1v1].
      const aLog = hf("model.layers.0.linear_attn.A_log");
      const tiled = [0, 2, 1, 3];
      expect(await f32("blk.0.ssm_a")).toEqual(Float32Array.from(tiled, (i) => -Math.exp(aLog[i])));
      const dt = hf("model.layers.0.linear_attn.dt_bias");
      expect(await f32("blk.0.ssm_dt.bias")).toEqual(Float32Array.from(tiled, (i) => dt[i]));
    } finally {
      await file.close();
    }
  });
});

describe.skipIf(unavailable !== null)("a tiny random Qwen3.5 through kiln's GGUF export, in llama.cpp (qwen35)", () => {
  it("loads, and gives kiln's greedy tokens and next-token log-probs", async () => {
    const dir = join(tmp, "qwen35");
    const { files } = await loadStories260K();
    const repo = new Map(files);
    repo.set("config.json", new TextEncoder().encode(JSON.stringify(CONFIG)));
    repo.set("model.safetensors", serializeSafetensors(weights(), { format: "pt" }));
    await writeRepoFiles(dir, repo);
    const path = join(tmp, "qwen35.gguf");
    await exportModelToGguf(dir, path);
    const kiln = await loadModel(dir);
    // The same GGUF loaded back into kiln (qwen35 import) runs as llama.cpp runs it too.
    const kilnFromGguf = await loadModel(path);
    const model = await (llama as LlamaCppHandle).loadModel({ modelPath: path, gpuLayers: 0 });
    let worst = 0;
    let worstImported = 0;
    for (const ids of PROMPTS) {
      const k = kilnRun(kiln, ids);
      const l = await llamaCppRun(model, ids);
      const g = kilnRun(kilnFromGguf, ids);
      expect(l.greedy, `imported ${JSON.stringify(ids)}`).toEqual(g.greedy.slice(0, l.greedy.length));
      for (const [t, p] of l.probs)
        if (p > 1e-6) worstImported = Math.max(worstImported, Math.abs(Math.log(p) - g.logprobs[t]));
      // llama.cpp stops after an end-of-generation token (eos 2); kiln was told not to.
      expect(l.greedy.length === STEPS || l.greedy.at(-1) === CONFIG.eos_token_id).toBe(true);
      expect(l.greedy, JSON.stringify(ids)).toEqual(k.greedy.slice(0, l.greedy.length));
      expect(l.probs.size).toBe(k.logprobs.length);
      for (const [t, p] of l.probs) if (p > 1e-6) worst = Math.max(worst, Math.abs(Math.log(p) - k.logprobs[t]));
    }
    process.stderr.write(
      `qwen35 worst |Δ log p| = ${worst.toExponential(2)} (kiln from the GGUF: ${worstImported.toExponential(2)})\n`,
    );
    expect(worst).toBeLessThan(QWEN35_LOGPROB_TOLERANCE);
    expect(worstImported).toBeLessThan(QWEN35_LOGPROB_TOLERANCE);
    await model.dispose();
  }, 120_000);
});
