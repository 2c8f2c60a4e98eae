// HF directory → GGUF → HF directory: names, RoPE row order, hyperparameters and tokenizer survive;
// f32 and bf16 weights come back bit for bit, q8_0 within its quantisation error. (llama.cpp itself
// runs the exported files in packages/kit/test/gguf-llama-cpp.test.ts.)
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  GgufConvertError,
  GgufFile,
  SafetensorsFile,
  convertGgufToHf,
  convertLlama2cToHf,
  exportAdapterToGguf,
  exportModelToGguf,
  fromFloat32,
  ggufToHfFiles,
  loraConfig,
  parseSafetensors,
  permuteRopeRows,
  readRepoConfigs,
  toFloat32,
  writeFileAtomic,
  writePeftAdapter,
  writeSafetensorsFile,
} from "../src/index.js";
import { rng } from "./fuzz-inputs.js";
import { tempDir } from "./helpers.js";

const fixture = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../models/data/stories260K/${name}`, import.meta.url)));
const tmp = tempDir("hub-io-gguf-");
/** Byte equality without vitest's element-wise diffing (slow on 100k-element arrays). */
const sameBytes = (a: Uint8Array | undefined, b: Uint8Array) =>
  a !== undefined && Buffer.from(a).equals(Buffer.from(b));
afterAll(() => tmp.cleanup());

const hfDir = join(tmp.dir, "stories260K-hf");
const ready = convertLlama2cToHf(fixture("stories260K.bin"), fixture("tok512.bin")).writeTo(hfDir);

async function hfTensors(dir: string): Promise<Map<string, { dtype: string; shape: number[]; data: Uint8Array }>> {
  const f = await SafetensorsFile.open(join(dir, "model.safetensors"));
  const out = new Map<string, { dtype: string; shape: number[]; data: Uint8Array }>();
  for (const k of f.keys()) out.set(k, { dtype: f.info(k).dtype, shape: [...f.info(k).shape], data: await f.read(k) });
  await f.close();
  return out;
}

describe("exportModelToGguf (Llama: stories260K)", () => {
  it("writes llama.cpp's names, hyperparameters, un-permuted q/k rows and a SentencePiece vocabulary", async () => {
    await ready;
    const out = join(tmp.dir, "s.gguf");
    const report = await exportModelToGguf(hfDir, out, { dtype: "f32" });
    expect(report.architecture).toBe("llama");
    const f = await GgufFile.open(out);
    expect(f.get("general.architecture")).toBe("llama");
    expect(f.get("llama.block_count")).toBe(5);
    expect(f.get("llama.embedding_length")).toBe(64);
    expect(f.get("llama.attention.head_count")).toBe(8);
    expect(f.get("llama.attention.head_count_kv")).toBe(4);
    expect(f.get("tokenizer.ggml.model")).toBe("llama");
    expect((f.get("tokenizer.ggml.tokens") as string[]).slice(0, 4)).toEqual(["<unk>", "<s>", "</s>", "<0x00>"]);
    expect((f.get("tokenizer.ggml.token_type") as number[]).slice(0, 4)).toEqual([2, 3, 3, 6]);
    expect(f.get("tokenizer.ggml.bos_token_id")).toBe(1);
    expect(f.get("tokenizer.ggml.add_bos_token")).toBe(true);
    // Tied embeddings: no output.weight (llama.cpp reuses token_embd).
    expect(f.tensors.map((t) => t.name)).not.toContain("output.weight");
    expect(f.tensors[0].name).toBe("token_embd.weight");
    // q rows are in Meta's interleaved order: exactly the llama2.c checkpoint's wq, which run.c uses.
    const hf = await hfTensors(hfDir);
    const q = hf.get("model.layers.0.self_attn.q_proj.weight")!;
    expect(await f.raw("blk.0.attn_q.weight")).toEqual(permuteRopeRows(q.data, 64, 8, true));
    const k = hf.get("model.layers.0.self_attn.k_proj.weight")!;
    expect(await f.raw("blk.0.attn_k.weight")).toEqual(permuteRopeRows(k.data, 32, 4, true));
    await f.close();
  });

  it("f32 export → import gives every tensor back bit for bit, and the config's numbers", async () => {
    await ready;
    const out = join(tmp.dir, "s32.gguf");
    await exportModelToGguf(hfDir, out, { dtype: "f32" });
    const back = join(tmp.dir, "s32-hf");
    await convertGgufToHf(out, back);
    const a = await hfTensors(hfDir);
    const b = await hfTensors(back);
    expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
    for (const [name, t] of a) {
      expect({ dtype: b.get(name)?.dtype, shape: b.get(name)?.shape }, name).toEqual({
        dtype: t.dtype,
        shape: t.shape,
      });
      expect(sameBytes(b.get(name)?.data, t.data), name).toBe(true);
    }
    const c0 = (await readRepoConfigs(hfDir)).config;
    const c1 = (await readRepoConfigs(back)).config;
    for (const key of [
      "hidden_size",
      "intermediate_size",
      "num_hidden_layers",
      "num_attention_heads",
      "num_key_value_heads",
      "rms_norm_eps",
      "rope_theta",
      "vocab_size",
      "tie_word_embeddings",
    ]) {
      expect(Number(c1[key]), key).toBe(Number(c0[key]));
    }
  });

  it("bf16 export → import keeps the bf16 bits of every matrix", async () => {
    await ready;
    // A bf16 copy of stories260K (matrices bf16, vectors f32).
    const bfDir = join(tmp.dir, "s-bf16");
    const src = await hfTensors(hfDir);
    const tensors = new Map(
      [...src].map(([n, t]) => [
        n,
        t.shape.length === 2
          ? {
              dtype: "BF16" as const,
              shape: t.shape,
              data: fromFloat32(toFloat32({ dtype: "F32", data: t.data }), "BF16"),
            }
          : { dtype: "F32" as const, shape: t.shape, data: t.data },
      ]),
    );
    await writeSafetensorsFile(join(bfDir, "model.safetensors"), tensors);
    for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json"])
      await writeFileAtomic(join(bfDir, f), readFileSync(join(hfDir, f)));
    const out = join(tmp.dir, "sbf16.gguf");
    const report = await exportModelToGguf(bfDir, out, { dtype: "bf16" });
    expect(new Set(report.tensors.filter((t) => t.shape.length === 2).map((t) => t.type))).toEqual(new Set(["BF16"]));
    const files = await ggufToHfFiles(out, { dtype: "bf16" });
    const { tensors: back } = parseSafetensors(files.get("model.safetensors") as Uint8Array);
    for (const [name, t] of tensors) expect(sameBytes(back.get(name)?.data, t.data), name).toBe(true);
  });

  it("q8_0 export → import is within each block's quantisation error; rows that are not whole blocks fall back to F16", async () => {
    await ready;
    const out = join(tmp.dir, "sq8.gguf");
    const report = await exportModelToGguf(hfDir, out, { dtype: "q8_0" });
    expect(report.tensors.find((t) => t.name === "blk.0.attn_q.weight")?.type).toBe("Q8_0");
    // ffn_down rows are 172 long (not a multiple of 32): F16, as llama.cpp's converter does.
    expect(report.tensors.find((t) => t.name === "blk.0.ffn_down.weight")?.type).toBe("F16");
    expect(report.notes.join(" ")).toMatch(/not a multiple of 32 are F16/);
    const files = await ggufToHfFiles(out);
    const { tensors: back } = parseSafetensors(files.get("model.safetensors") as Uint8Array);
    for (const [name, t] of await hfTensors(hfDir)) {
      const x = toFloat32({ dtype: "F32", data: t.data });
      const y = toFloat32(back.get(name)!);
      if (t.shape.length !== 2) {
        expect(sameBytes(back.get(name)?.data, t.data), name).toBe(true);
        continue;
      }
      let worst = Number.NEGATIVE_INFINITY;
      const cols = t.shape[1];
      const block = cols % 32 === 0 ? 32 : cols;
      for (let s = 0; s < x.length; s += block) {
        let amax = 0;
        for (let j = s; j < s + block; j++) amax = Math.max(amax, Math.abs(x[j]));
        const bound = 1e-12 + (block === 32 ? amax / 127 / 2 + amax * 2 ** -11 : amax * 2 ** -11);
        for (let j = s; j < s + block; j++) worst = Math.max(worst, Math.abs(y[j] - x[j]) - bound);
      }
      expect(worst, `${name}: largest error above its block's bound`).toBeLessThanOrEqual(0);
    }
  });

  it("refuses architectures llama.cpp's names do not cover, naming them", async () => {
    const dir = join(tmp.dir, "odd");
    await writeFileAtomic(
      join(dir, "config.json"),
      JSON.stringify({ architectures: ["GPT2LMHeadModel"], model_type: "gpt2" }),
    );
    await expect(exportModelToGguf(dir, join(tmp.dir, "odd.gguf"))).rejects.toThrow(GgufConvertError);
    await expect(exportModelToGguf(dir, join(tmp.dir, "odd.gguf"))).rejects.toThrow(
      /GPT2LMHeadModel.*supported: LlamaForCausalLM/,
    );
    await expect(exportModelToGguf(hfDir, join(tmp.dir, "x.gguf"), { dtype: "q4" as "f32" })).rejects.toThrow(
      /dtype "q4" is not one of f32, f16, bf16, q8_0/,
    );
  });
});

describe("exportAdapterToGguf", () => {
  it("writes a GGUF LoRA: adapter keys, lora_a [r, in] / lora_b [out, r], alpha = s·r, q's lora_b rows un-permuted", async () => {
    await ready;
    const r = rng(5);
    const rand = (n: number) => Float32Array.from({ length: n }, () => r() - 0.5);
    const rank = 4;
    const A = { dtype: "F32" as const, shape: [rank, 64], data: fromFloat32(rand(rank * 64), "F32") };
    const Bq = { dtype: "F32" as const, shape: [64, rank], data: fromFloat32(rand(64 * rank), "F32") };
    const Bv = { dtype: "F32" as const, shape: [32, rank], data: fromFloat32(rand(32 * rank), "F32") };
    const dir = join(tmp.dir, "adapter");
    await writePeftAdapter(dir, {
      config: loraConfig({
        r: rank,
        lora_alpha: 8,
        target_modules: ["q_proj", "v_proj"],
        base_model_name_or_path: hfDir,
      }),
      layers: new Map([
        ["model.layers.1.self_attn.q_proj", { A, B: Bq }],
        ["model.layers.1.self_attn.v_proj", { A, B: Bv }],
      ]),
    });
    const out = join(tmp.dir, "adapter.gguf");
    const report = await exportAdapterToGguf(dir, out);
    expect(report.kind).toBe("adapter");
    const f = await GgufFile.open(out);
    expect(f.get("general.type")).toBe("adapter");
    expect(f.get("adapter.type")).toBe("lora");
    expect(f.get("adapter.lora.alpha")).toBe(8);
    expect(f.get("general.architecture")).toBe("llama");
    expect(f.tensors.map((t) => [t.name, t.shape])).toEqual([
      ["blk.1.attn_q.weight.lora_a", [rank, 64]],
      ["blk.1.attn_q.weight.lora_b", [64, rank]],
      ["blk.1.attn_v.weight.lora_a", [rank, 64]],
      ["blk.1.attn_v.weight.lora_b", [32, rank]],
    ]);
    expect(await f.raw("blk.1.attn_q.weight.lora_b")).toEqual(permuteRopeRows(Bq.data, 64, 8, true));
    expect(await f.raw("blk.1.attn_v.weight.lora_b")).toEqual(Bv.data);
    await f.close();
    await expect(exportAdapterToGguf(dir, out, { baseDir: join(tmp.dir, "missing") })).rejects.toThrow(
      /base model .*missing/,
    );
  });
});
