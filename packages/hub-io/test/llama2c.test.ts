import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { afterAll, describe, expect, it } from "vitest";
import {
  Llama2cError,
  SafetensorsFile,
  convertLlama2c,
  convertLlama2cToHf,
  hfWeightsToLlama2c,
  llama2cEncode,
  llama2cToHfWeights,
  parseLlama2cCheckpoint,
  parseLlama2cTokenizer,
  permuteInterleavedToRotateHalf,
  permuteRotateHalfToInterleaved,
  readRepoConfigs,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

const fixture = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../models/data/stories260K/${name}`, import.meta.url)));
const ckptBytes = fixture("stories260K.bin");
const tokBytes = fixture("tok512.bin");
const tmp = tempDir();
afterAll(tmp.cleanup);

describe("llama2.c checkpoint", () => {
  const ckpt = parseLlama2cCheckpoint(ckptBytes);

  it("parses the stories260K header", () => {
    expect(ckpt.config).toEqual({
      dim: 64,
      hiddenDim: 172,
      nLayers: 5,
      nHeads: 8,
      nKvHeads: 4,
      vocabSize: 512,
      seqLen: 512,
      sharedClassifier: true,
    });
    expect(ckpt.weights.wk.length).toBe(5 * 32 * 64);
  });

  it("the q/k permutation is exactly inverted (HF → llama2.c gives the original file byte for byte)", () => {
    const hf = llama2cToHfWeights(ckpt);
    expect(hf.tensors.has("lm_head.weight")).toBe(false);
    const q0 = hf.tensors.get("model.layers.0.self_attn.q_proj.weight")!;
    // Row 1 of head 0 in HF layout (first half, j = 1) is llama2.c row 2.
    expect(q0.values.subarray(64, 128)).toEqual(ckpt.weights.wq.subarray(2 * 64, 3 * 64));
    expect(q0.values.subarray(4 * 64, 5 * 64)).toEqual(ckpt.weights.wq.subarray(1 * 64, 2 * 64));
    const back = hfWeightsToLlama2c(ckpt.config, hf, {
      real: ckpt.weights.freqCisReal,
      imag: ckpt.weights.freqCisImag,
    });
    expect(Buffer.compare(Buffer.from(back), Buffer.from(ckptBytes))).toBe(0);
    // Recomputed legacy RoPE tables agree with the stored ones.
    const recomputed = parseLlama2cCheckpoint(hfWeightsToLlama2c(ckpt.config, hf));
    let maxErr = 0;
    for (let i = 0; i < ckpt.weights.freqCisReal.length; i++) {
      maxErr = Math.max(maxErr, Math.abs(recomputed.weights.freqCisReal[i] - ckpt.weights.freqCisReal[i]));
    }
    expect(maxErr).toBeLessThan(1e-5);
    const m = Float32Array.from({ length: 4 * 8 * 3 }, (_, i) => i);
    expect(permuteRotateHalfToInterleaved(permuteInterleavedToRotateHalf(m, 4, 32, 3), 4, 32, 3)).toEqual(m);
    expect(permuteInterleavedToRotateHalf(m, 4, 32, 3)).not.toEqual(m);
  });

  it("refuses truncated, v1 ('ak42') and inconsistent checkpoints", () => {
    expect(() => parseLlama2cCheckpoint(ckptBytes.subarray(0, 1000))).toThrow(Llama2cError);
    const v1 = ckptBytes.slice(0, 256);
    new DataView(v1.buffer).setUint32(0, 0x616b3432, true);
    expect(() => parseLlama2cCheckpoint(v1)).toThrow(/ak42/);
    const bad = ckptBytes.slice();
    new DataView(bad.buffer).setInt32(12, 7, true); // n_heads = 7 does not divide dim 64
    expect(() => parseLlama2cCheckpoint(bad)).toThrow(/inconsistent/);
    expect(() => parseLlama2cTokenizer(tokBytes, 511)).toThrow(/bytes left/);
    expect(() => parseLlama2cTokenizer(tokBytes.subarray(0, 100), 512)).toThrow(Llama2cError);
  });
});

/** Plain HF LlamaForCausalLM forward (rotate-half RoPE) in float64 over the converted weights. */
function hfForward(get: (n: string) => Float32Array, cfg: Record<string, number>, tokens: number[]): Float64Array[] {
  const d = cfg.hidden_size;
  const H = cfg.num_attention_heads;
  const KV = cfg.num_key_value_heads;
  const hs = d / H;
  const ff = cfg.intermediate_size;
  const V = cfg.vocab_size;
  const mv = (w: Float32Array, x: Float64Array, rows: number, cols: number) => {
    const y = new Float64Array(rows);
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let c = 0; c < cols; c++) s += w[r * cols + c] * x[c];
      y[r] = s;
    }
    return y;
  };
  const rms = (x: Float64Array, w: Float32Array) => {
    let ss = 0;
    for (const v of x) ss += v * v;
    const k = 1 / Math.sqrt(ss / x.length + cfg.rms_norm_eps);
    return x.map((v, i) => v * k * w[i]);
  };
  const rope = (v: Float64Array, heads: number, pos: number) => {
    const out = new Float64Array(v.length);
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < hs / 2; i++) {
        const ang = pos / cfg.rope_theta ** ((2 * i) / hs);
        const [a, b] = [v[h * hs + i], v[h * hs + i + hs / 2]];
        out[h * hs + i] = a * Math.cos(ang) - b * Math.sin(ang);
        out[h * hs + i + hs / 2] = b * Math.cos(ang) + a * Math.sin(ang);
      }
    }
    return out;
  };
  const emb = get("model.embed_tokens.weight");
  let xs = tokens.map((t) => Float64Array.from(emb.subarray(t * d, (t + 1) * d)));
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = (n: string) => get(`model.layers.${l}.${n}.weight`);
    const qs: Float64Array[] = [];
    const ks: Float64Array[] = [];
    const vs: Float64Array[] = [];
    xs.forEach((x, pos) => {
      const xb = rms(x, p("input_layernorm"));
      qs.push(rope(mv(p("self_attn.q_proj"), xb, d, d), H, pos));
      ks.push(rope(mv(p("self_attn.k_proj"), xb, KV * hs, d), KV, pos));
      vs.push(mv(p("self_attn.v_proj"), xb, KV * hs, d));
    });
    xs = xs.map((x, pos) => {
      const att = new Float64Array(d);
      for (let h = 0; h < H; h++) {
        const kv = Math.floor(h / (H / KV));
        const sc = Array.from({ length: pos + 1 }, (_, s) => {
          let dot = 0;
          for (let i = 0; i < hs; i++) dot += qs[pos][h * hs + i] * ks[s][kv * hs + i];
          return dot / Math.sqrt(hs);
        });
        const mx = Math.max(...sc);
        const e = sc.map((v) => Math.exp(v - mx));
        const z = e.reduce((a, b) => a + b, 0);
        for (let s = 0; s <= pos; s++) for (let i = 0; i < hs; i++) att[h * hs + i] += (e[s] / z) * vs[s][kv * hs + i];
      }
      const x1 = x.map((v, i) => v + mv(p("self_attn.o_proj"), att, d, d)[i]);
      const xb = rms(x1, p("post_attention_layernorm"));
      const g = mv(p("mlp.gate_proj"), xb, ff, d);
      const u = mv(p("mlp.up_proj"), xb, ff, d);
      const hdn = g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i]);
      const down = mv(p("mlp.down_proj"), hdn, d, ff);
      return x1.map((v, i) => v + down[i]);
    });
  }
  return xs.map((x) => mv(emb, rms(x, get("model.norm.weight")), V, d));
}

describe("convertLlama2c → Hugging Face Llama directory", () => {
  it("writes a directory whose weights give llama2.c's logits under HF's rotate-half forward", async () => {
    const out = join(tmp.dir, "stories260K-hf");
    const conv = await convertLlama2c({
      checkpoint: new URL("../../models/data/stories260K/stories260K.bin", import.meta.url).pathname,
      tokenizer: new URL("../../models/data/stories260K/tok512.bin", import.meta.url).pathname,
      outDir: out,
    });
    expect([...conv.files.keys()].sort()).toEqual([
      "config.json",
      "generation_config.json",
      "model.safetensors",
      "special_tokens_map.json",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    const repo = await readRepoConfigs(out);
    expect(repo.config).toMatchObject({
      model_type: "llama",
      hidden_size: 64,
      num_key_value_heads: 4,
      tie_word_embeddings: true,
    });
    expect(readFileSync(join(out, "config.json"), "utf8")).toMatch(/"rope_theta": 10000\.0,\n/);
    const f = await SafetensorsFile.open(join(out, "model.safetensors"));
    expect(f.keys().length).toBe(2 + 5 * 9);
    expect(f.metadata).toEqual({ format: "pt" });
    const weights = new Map<string, Float32Array>();
    for (const k of f.keys()) weights.set(k, await f.readFloat32(k));
    await f.close();
    const ref = JSON.parse(readFileSync(new URL("./fixtures/stories260K/logits.json", import.meta.url), "utf8"));
    const b = Buffer.from(ref.logits_f32_b64, "base64");
    const want = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
    const tokens: number[] = ref.tokens.slice(0, 6);
    const got = hfForward((n) => weights.get(n)!, repo.config as Record<string, number>, tokens);
    let maxErr = 0;
    for (const [t, row] of got.entries()) {
      for (const [i, v] of row.entries()) maxErr = Math.max(maxErr, Math.abs(v - want[t * ref.vocab + i]));
    }
    expect(maxErr).toBeLessThan(1e-4);
    // Greedy next tokens agree with the reference run.
    for (const [t, row] of got.entries()) expect(row.indexOf(Math.max(...row))).toBe(ref.tokens[t + 1]);
  });

  it("tokenizer.json loads in @huggingface/tokenizers and matches run.c's encoder", () => {
    const conv = convertLlama2cToHf(ckptBytes, tokBytes);
    const tokenizer = new Tokenizer(
      JSON.parse(conv.files.get("tokenizer.json") as string),
      JSON.parse(conv.files.get("tokenizer_config.json") as string),
    );
    const tok = conv.tokenizer!;
    const sentences = [
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the sunshine with her dog, Max!",
      'Tom said, "I am 3 years old." The end.',
      "Ünïcödé and emoji 🙂 fall back to bytes.",
    ];
    for (const s of sentences) {
      const ids = tokenizer.encode(s).ids;
      expect(ids[0]).toBe(1); // BOS
      expect(ids).toEqual(llama2cEncode(tok, s));
      expect(tokenizer.decode(ids, { skip_special_tokens: true })).toBe(s);
    }
    expect(tokenizer.encode(sentences[0]).ids.length).toBeLessThan(sentences[0].length / 2);
    // Against SentencePiece itself on tok512.model (make_sp_ids.py), whitespace rules included.
    const sp = JSON.parse(readFileSync(new URL("./fixtures/stories260K/sp_ids.json", import.meta.url), "utf8"));
    for (const c of sp.cases as { text: string; ids: number[]; decoded: string }[]) {
      const ids = tokenizer.encode(c.text).ids;
      expect(ids, JSON.stringify(c.text)).toEqual([1, ...c.ids]);
      expect(tokenizer.decode(ids, { skip_special_tokens: true }), JSON.stringify(c.text)).toBe(c.decoded);
    }
    // The reference greedy continuation from BOS decodes to a TinyStories opening.
    const ref = JSON.parse(readFileSync(new URL("./fixtures/stories260K/logits.json", import.meta.url), "utf8"));
    expect(tokenizer.decode(ref.tokens, { skip_special_tokens: true })).toMatch(/^Once upon a time/);
  });
});
