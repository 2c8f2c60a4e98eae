// Qwen3.5 (hybrid Gated DeltaNet + gated attention) against our PyTorch transcription of
// transformers' modeling_qwen3_5.py (fixtures/make_qwen3_5.py → fixtures/qwen3_5/*).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type TensorData, parseSafetensors, serializeSafetensors, toFloat32 } from "@kiln/hub-io";
import { Rng, Tensor, backward, concat, crossEntropy, narrow, noGrad, reshape, sum, mul, tensor } from "@kiln/tensor";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  type CausalLM,
  type GatedDeltaNet,
  type GatedDeltaRuleInputs,
  WeightLoadError,
  createModel,
  gatedDeltaRuleChunked,
  gatedDeltaRuleRecurrent,
  generate,
  l2Normalize,
  loadModel,
  parseDecoderConfig,
  scoreCompletions,
} from "../src/index.js";
import { FIXTURES, maxAbsDiff } from "./helpers.js";

const CASES = ["vlm", "text"] as const;

function dir(name: string): string {
  return join(FIXTURES, "qwen3_5", name);
}

function readTensors(name: string, file: string): Map<string, TensorData> {
  return parseSafetensors(new Uint8Array(readFileSync(join(dir(name), file)))).tensors;
}

interface Expected {
  ids: Int32Array;
  mask: Int32Array;
  logits: Float32Array;
  loss: number;
  greedy: Int32Array;
  B: number;
  T: number;
  V: number;
}

function expected(name: string): Expected {
  const t = readTensors(name, "expected.safetensors");
  const get = (k: string) => t.get(k) as TensorData;
  const i32 = (d: TensorData) =>
    new Int32Array(d.data.buffer.slice(d.data.byteOffset, d.data.byteOffset + d.data.byteLength));
  const [B, T, V] = get("logits").shape;
  return {
    ids: i32(get("input_ids")),
    mask: i32(get("attention_mask")),
    logits: Float32Array.from(toFloat32(get("logits"))),
    loss: toFloat32(get("loss"))[0],
    greedy: i32(get("greedy")),
    B,
    T,
    V,
  };
}

function setChunkSize(model: CausalLM, size: number): void {
  for (const layer of model.layers) {
    const mixer = (layer as { linearAttn?: GatedDeltaNet }).linearAttn;
    if (mixer) mixer.chunkSize = size;
  }
}

/** Next-token CE over real targets from real positions (make_qwen3_5.py causal_lm_loss). */
function causalLoss(logits: Tensor, e: Expected): Tensor {
  const targets = new Int32Array(e.B * (e.T - 1));
  for (let b = 0; b < e.B; b++) {
    for (let t = 0; t < e.T - 1; t++) {
      const j = b * e.T + t + 1;
      targets[b * (e.T - 1) + t] = e.mask[j] && e.mask[j - 1] ? e.ids[j] : -100;
    }
  }
  const shifted = reshape(narrow(logits, 1, 0, e.T - 1), [e.B * (e.T - 1), e.V]);
  return crossEntropy(shifted, new Tensor(targets, [e.B * (e.T - 1)], "i32"));
}

let info: ReturnType<typeof vi.spyOn>;
beforeEach(() => {
  info = vi.spyOn(console, "info").mockImplementation(() => {});
});
afterEach(() => info.mockRestore());

describe("Qwen3.5 config", () => {
  it("reads the nested text_config of Qwen3_5ForConditionalGeneration", () => {
    const c = parseDecoderConfig(JSON.parse(readFileSync(join(dir("vlm"), "config.json"), "utf8")));
    expect(c.architecture).toBe("Qwen3_5ForConditionalGeneration");
    expect(c.weightPrefix).toBe("model.language_model.");
    expect(c.layerTypes).toEqual(["linear_attention", "linear_attention", "linear_attention", "full_attention"]);
    expect([c.zeroCenteredNorm, c.attnOutputGate, c.qkNorm, c.tieWordEmbeddings]).toEqual([true, true, true, true]);
    expect(c.partialRotaryFactor).toBe(0.25);
    expect(c.linearAttention).toEqual({
      convKernel: 4,
      numKeyHeads: 2,
      numValueHeads: 4,
      keyHeadDim: 8,
      valueHeadDim: 8,
    });
    expect(c.hiddenSize).toBe(32);
  });

  it("derives layer_types from full_attention_interval for the text-only class", () => {
    const c = parseDecoderConfig(JSON.parse(readFileSync(join(dir("text"), "config.json"), "utf8")));
    expect(c.architecture).toBe("Qwen3_5ForCausalLM");
    expect(c.weightPrefix).toBe("model.");
    expect(c.layerTypes).toEqual(["linear_attention", "full_attention", "linear_attention", "full_attention"]);
    expect(c.tieWordEmbeddings).toBe(false);
    expect(c.partialRotaryFactor).toBe(0.5);
  });

  it("rejects linear heads that do not divide", () => {
    const raw = JSON.parse(readFileSync(join(dir("text"), "config.json"), "utf8"));
    expect(() => parseDecoderConfig({ ...raw, linear_num_value_heads: 3 })).toThrow(
      /linear_num_value_heads 3 is not a multiple of linear_num_key_heads 2/,
    );
  });
});

describe("Qwen3.5 forward against the PyTorch transcription", () => {
  for (const name of CASES) {
    for (const storage of ["", "-bf16"]) {
      it(`${name}${storage}: logits of a left-padded batch (chunk sizes 64, 4, 3)`, async () => {
        const e = expected(`${name}${storage}`);
        const model = await loadModel(dir(`${name}${storage}`), { dtype: storage ? "bf16" : "f32" });
        const ids = new Tensor(e.ids, [e.B, e.T], "i32");
        for (const chunk of [64, 4, 3]) {
          setChunkSize(model, chunk);
          const logits = noGrad(() => model.forward(ids, { attentionMask: e.mask }));
          expect(logits.shape).toEqual([e.B, e.T, e.V]);
          // The padded row's padding positions carry no meaning (transformers' nan_to_num rows); compare real ones.
          const got = logits.toFloat32Array();
          let worst = 0;
          for (let i = 0; i < e.B * e.T; i++) {
            if (!e.mask[i]) continue;
            worst = Math.max(
              worst,
              maxAbsDiff(got.subarray(i * e.V, (i + 1) * e.V), e.logits.subarray(i * e.V, (i + 1) * e.V)),
            );
          }
          // bf16 weights go through a different GEMM path (widened per block); sums round differently.
          expect(worst).toBeLessThan(storage ? 3e-4 : 1e-4);
        }
      });
    }
  }

  it("skips the vision tower with one log line and ignores mtp.* tensors", async () => {
    await loadModel(dir("vlm"));
    const lines = info.mock.calls.map((c: unknown[]) => String(c[0]));
    expect(lines.filter((l: string) => l.includes("vision"))).toHaveLength(1);
    expect(lines[0]).toMatch(/skipped 3 vision-tower tensors \(model\.visual\.\*\)/);
  });

  it("names a missing linear-attention tensor", async () => {
    const files = new Map<string, Uint8Array | string>([
      ["config.json", readFileSync(join(dir("text"), "config.json"), "utf8")],
      ["model.safetensors", new Uint8Array(readFileSync(join(dir("text"), "model.safetensors")))],
    ]);
    const raw = JSON.parse(files.get("config.json") as string);
    raw.linear_conv_kernel_dim = 4;
    files.set("config.json", JSON.stringify(raw));
    await expect(loadModel(files)).rejects.toThrow(WeightLoadError);
    await expect(loadModel(files)).rejects.toThrow(
      /model\.layers\.0\.linear_attn\.conv1d\.weight: checkpoint \[56, 1, 3\] vs model \[56, 1, 4\]/,
    );
    const keys = parseSafetensors(files.get("model.safetensors") as Uint8Array).tensors;
    keys.delete("model.layers.2.linear_attn.A_log");
    raw.linear_conv_kernel_dim = 3;
    files.set("config.json", JSON.stringify(raw));
    files.set("model.safetensors", serializeSafetensors(keys));
    await expect(loadModel(files)).rejects.toThrow(/missing keys: model\.layers\.2\.linear_attn\.A_log/);
  });

  for (const name of CASES) {
    it(`${name}: loss and the gradient of every parameter`, async () => {
      const e = expected(name);
      const model = await loadModel(dir(name), { trainable: true });
      setChunkSize(model, 4);
      const loss = causalLoss(model.forward(new Tensor(e.ids, [e.B, e.T], "i32"), { attentionMask: e.mask }), e);
      expect(Math.abs(loss.item() - e.loss)).toBeLessThan(1e-5);
      backward(loss);
      const grads = readTensors(name, "grads.safetensors");
      const params = model.namedParameters();
      expect(new Set(params.map(([n]) => n))).toEqual(new Set(grads.keys()));
      for (const [pname, p] of params) {
        const want = toFloat32(grads.get(pname) as TensorData);
        const got = (p.grad as Tensor).toFloat32Array();
        let scale = 0;
        for (const v of want) scale = Math.max(scale, Math.abs(v));
        const err = maxAbsDiff(got, want);
        expect(err, `${pname}: max |Δ| ${err} (max |grad| ${scale})`).toBeLessThan(2e-5 + 1e-3 * scale);
      }
    });
  }
});

describe("Qwen3.5 decoding state", () => {
  for (const name of CASES) {
    it(`${name}: cached greedy generation equals the recomputed reference`, async () => {
      const e = expected(name);
      const model = await loadModel(dir(name));
      const prompts = Array.from({ length: e.B }, (_, b) =>
        [...e.ids.subarray(b * e.T, (b + 1) * e.T)].filter((_, t) => e.mask[b * e.T + t] === 1),
      );
      const outs = generate(model, prompts, { temperature: 0, maxNewTokens: 6 });
      const steps = e.greedy.length / e.B;
      for (let b = 0; b < e.B; b++) {
        const want = [...e.greedy.subarray(b * steps, (b + 1) * steps)];
        const eos = model.config.eosTokenIds.find((id) => want.includes(id));
        const upTo = eos === undefined ? want : want.slice(0, want.indexOf(eos) + 1);
        expect(outs[b].tokenIds).toEqual(upTo);
      }
    });

    it(`${name}: prefill, a multi-token chunk and single-token steps equal a full recompute (batched, left-padded)`, async () => {
      const model = await loadModel(dir(name));
      setChunkSize(model, 4);
      const e = expected(name);
      const ids = new Tensor(e.ids, [e.B, e.T], "i32");
      const full = noGrad(() => model.forward(ids, { attentionMask: e.mask }));
      const cache = model.newCache(e.B);
      const pieces = noGrad(() => {
        const cut = [0, 5, 9, 10, 11];
        const out: Tensor[] = [];
        for (let i = 0; i + 1 < cut.length; i++) {
          const [s, t] = [cut[i], cut[i + 1]];
          const m = new Int32Array(e.B * (t - s));
          for (let b = 0; b < e.B; b++) m.set(e.mask.subarray(b * e.T + s, b * e.T + t), b * (t - s));
          out.push(model.forward(narrow(ids, 1, s, t), { attentionMask: m, cache }));
        }
        return concat(out, 1);
      });
      const got = pieces.toFloat32Array();
      const want = full.toFloat32Array();
      let worst = 0;
      for (let i = 0; i < e.B * e.T; i++) {
        if (!e.mask[i]) continue;
        worst = Math.max(
          worst,
          maxAbsDiff(got.subarray(i * e.V, (i + 1) * e.V), want.subarray(i * e.V, (i + 1) * e.V)),
        );
      }
      expect(worst).toBeLessThan(2e-5);
      expect(cache.layers.map((l) => l?.kind)).toEqual(
        model.config.layerTypes.map((t) => (t === "linear_attention" ? "linear_attention" : "attention")),
      );
    });

    it(`${name}: a left-padded row equals the same prompt alone`, async () => {
      const model = await loadModel(dir(name));
      const e = expected(name);
      const padded = noGrad(() => model.forward(new Tensor(e.ids, [e.B, e.T], "i32"), { attentionMask: e.mask }));
      const real = [...e.ids.subarray(e.T, 2 * e.T)].filter((_, t) => e.mask[e.T + t] === 1);
      const alone = noGrad(() => model.forward(new Tensor(Int32Array.from(real), [1, real.length], "i32")));
      const tail = narrow(narrow(padded, 0, 1, 2), 1, e.T - real.length);
      expect(maxAbsDiff(tail.toFloat32Array(), alone.toFloat32Array())).toBeLessThan(6e-5);
    });
  }
});

describe("Qwen3.5 scoring", () => {
  it("scoreCompletions equals the log-probs generate reported (sampled, batched, ragged prompts)", async () => {
    const model = await loadModel(dir("vlm-bf16"), { dtype: "bf16" });
    const prompts = [
      [5, 17, 42, 9, 3],
      [60, 2],
      [11, 12, 13, 14, 15, 16, 17, 18, 19],
    ];
    const outs = generate(model, prompts, { temperature: 1, seed: 5, maxNewTokens: 7, stopTokenIds: [] });
    const scores = scoreCompletions(
      model,
      outs.map((o) => ({ promptIds: o.promptIds, completionIds: o.tokenIds })),
    );
    for (const [i, o] of outs.entries()) expect(maxAbsDiff(scores[i], o.logprobs)).toBeLessThan(1e-4);
  });
});

/** Random delta-rule inputs: normalised q/k, decays in (−1.5, 0), β in (0, 1). */
function randomRule(seed: number, B: number, H: number, T: number, dk: number, dv: number, withState: boolean) {
  const rng = new Rng(seed);
  const t = (shape: number[], f: (u: number) => number, normal = true) => {
    const n = shape.reduce((a, b) => a * b, 1);
    return tensor((normal ? rng.normal(n) : rng.uniform(n)).map(f), shape);
  };
  return {
    q: l2Normalize(t([B, H, T, dk], (x) => x)),
    k: l2Normalize(t([B, H, T, dk], (x) => x)),
    v: t([B, H, T, dv], (x) => x),
    g: t([B, H, T], (u) => -1.5 * u, false),
    beta: t([B, H, T], (u) => u, false),
    initialState: withState ? t([B, H, dk, dv], (x) => 0.5 * x) : null,
  };
}

/** The recurrence in float64 on host arrays: the reference both forms must match. */
function recurrenceF64(x: GatedDeltaRuleInputs): { out: Float64Array; state: Float64Array } {
  const [B, H, T, dk] = x.k.shape;
  const dv = x.v.shape[3];
  const [q, k, v, g, beta] = [x.q, x.k, x.v, x.g, x.beta].map((u) => Float64Array.from(u.toFloat32Array()));
  const init = x.initialState ? Float64Array.from(x.initialState.toFloat32Array()) : null;
  const out = new Float64Array(B * H * T * dv);
  const state = new Float64Array(B * H * dk * dv);
  for (let bh = 0; bh < B * H; bh++) {
    const S = init ? init.slice(bh * dk * dv, (bh + 1) * dk * dv) : new Float64Array(dk * dv);
    for (let t = 0; t < T; t++) {
      const r = bh * T + t;
      const decay = Math.exp(g[r]);
      for (let i = 0; i < S.length; i++) S[i] *= decay;
      for (let j = 0; j < dv; j++) {
        let mem = 0;
        for (let i = 0; i < dk; i++) mem += S[i * dv + j] * k[r * dk + i];
        const delta = beta[r] * (v[r * dv + j] - mem);
        for (let i = 0; i < dk; i++) S[i * dv + j] += k[r * dk + i] * delta;
      }
      for (let j = 0; j < dv; j++) {
        let o = 0;
        for (let i = 0; i < dk; i++) o += S[i * dv + j] * q[r * dk + i];
        out[r * dv + j] = o / Math.sqrt(dk);
      }
    }
    state.set(S, bh * dk * dv);
  }
  return { out, state };
}

describe("gated delta rule", () => {
  it("chunked (several chunk sizes, ragged tail) and recurrent forms equal a float64 recurrence", () => {
    for (const withState of [false, true]) {
      const x = randomRule(withState ? 7 : 3, 2, 3, 13, 8, 5, withState);
      const ref = recurrenceF64(x);
      const forms = [gatedDeltaRuleRecurrent(x), ...[64, 5, 4, 1].map((c) => gatedDeltaRuleChunked(x, c))];
      for (const f of forms) {
        expect(maxAbsDiff(f.out.toFloat32Array(), ref.out)).toBeLessThan(2e-5);
        expect(maxAbsDiff(f.state.toFloat32Array(), ref.state)).toBeLessThan(2e-5);
      }
    }
  });

  it("stays accurate when the keys of a chunk are nearly parallel", () => {
    // Powers of the in-chunk write matrix grow combinatorially here; substitution must not.
    const x = randomRule(11, 1, 2, 32, 4, 3, false);
    const noise = x.k.toFloat32Array();
    const common = [0.5, -0.5, 0.5, 0.5];
    const k = l2Normalize(
      tensor(
        noise.map((v, i) => common[i % 4] + 1e-3 * v),
        x.k.shape,
      ),
    );
    const parallel = { ...x, k, g: mul(x.g, 0.01), beta: tensor(new Float32Array(64).fill(0.99), [1, 2, 32]) };
    const ref = recurrenceF64(parallel);
    const got = gatedDeltaRuleChunked(parallel, 32);
    expect(maxAbsDiff(got.out.toFloat32Array(), ref.out)).toBeLessThan(1e-4);
    expect(maxAbsDiff(got.state.toFloat32Array(), ref.state)).toBeLessThan(1e-4);
  });

  it("gradients of both forms agree and match central differences", () => {
    const base = randomRule(5, 1, 2, 7, 4, 3, true);
    const names = ["q", "k", "v", "g", "beta", "initialState"] as const;
    const loss = (x: GatedDeltaRuleInputs, chunked: boolean) => {
      const r = chunked ? gatedDeltaRuleChunked(x, 3) : gatedDeltaRuleRecurrent(x);
      // A fixed random projection of out and state, so every element matters.
      const w1 = new Rng(99).normal(r.out.size);
      const w2 = new Rng(98).normal(r.state.size);
      return add2(sum(mul(r.out, tensor(w1, r.out.shape))), sum(mul(r.state, tensor(w2, r.state.shape))));
    };
    const grads = (chunked: boolean) => {
      const x = Object.fromEntries(
        names.map((n) => [
          n,
          tensor(Float32Array.from((base[n] as Tensor).toFloat32Array()), (base[n] as Tensor).shape).requireGrad(),
        ]),
      ) as unknown as GatedDeltaRuleInputs;
      backward(loss(x, chunked));
      return names.map((n) => ((x[n] as Tensor).grad as Tensor).toFloat32Array());
    };
    const gc = grads(true);
    const gr = grads(false);
    for (const [i, n] of names.entries()) expect(maxAbsDiff(gc[i], gr[i]), n).toBeLessThan(2e-4);
    // Central differences (f32, h = 1e-2) on a few entries of each input.
    names.forEach((n, i) => {
      const src = (base[n] as Tensor).toFloat32Array();
      for (const idx of [0, Math.floor(src.length / 2), src.length - 1]) {
        const at = (delta: number) => {
          const moved = Float32Array.from(src);
          moved[idx] += delta;
          const x = { ...base, [n]: tensor(moved, (base[n] as Tensor).shape) };
          return noGrad(() => loss(x, true).item());
        };
        const h = 1e-2;
        const fd = (at(h) - at(-h)) / (2 * h);
        expect(Math.abs(fd - gc[i][idx]), `${n}[${idx}] fd ${fd} vs ${gc[i][idx]}`).toBeLessThan(
          2e-2 * (1 + Math.abs(fd)),
        );
      }
    });
  });
});

function add2(a: Tensor, b: Tensor): Tensor {
  return sum(concat([reshape(a, [1]), reshape(b, [1])], 0));
}

describe("Qwen3.5 random init", () => {
  it("builds a hybrid model from a config alone and trains its linear-attention parameters", () => {
    const raw = JSON.parse(readFileSync(join(dir("vlm"), "config.json"), "utf8"));
    const model = createModel(raw, { seed: 4 });
    const names = model.namedParameters().map(([n]) => n);
    expect(names).toContain("model.language_model.layers.0.linear_attn.A_log");
    expect(names).toContain("model.language_model.layers.3.self_attn.q_norm.weight");
    const linears = model.namedLinears().map(([n]) => n);
    expect(linears.slice(0, 5)).toEqual(
      ["in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"].map(
        (s) => `model.language_model.layers.0.linear_attn.${s}`,
      ),
    );
    const params = model.requireGrad();
    const ids = new Tensor(Int32Array.from([1, 5, 9, 2, 7, 3]), [1, 6], "i32");
    const logits = model.forward(ids, { checkpointLayers: true });
    backward(sum(mul(logits, logits)));
    const aLog = params.find((p) => p === model.stateDict().get("model.language_model.layers.1.linear_attn.A_log"));
    expect(aLog?.grad?.toFloat32Array().some((v) => v !== 0)).toBe(true);
  });
});
