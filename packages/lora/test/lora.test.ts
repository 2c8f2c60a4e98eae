import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PeftError } from "@kiln/hub-io";
import { createModel, type Model } from "@kiln/models";
import * as T from "@kiln/tensor";
import { afterAll, describe, expect, it } from "vitest";
import {
  AdapterChain,
  LoraError,
  attachLora,
  combineAdapters,
  deltaWeight,
  loadAdapter,
  mergeAdapter,
  parameterReport,
  saveAdapter,
  unmergeAdapter,
} from "../src/index.js";

const tmp = mkdtempSync(join(tmpdir(), "kiln-lora-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function tinyModel(seed = 1): Model {
  return createModel(
    {
      architectures: ["LlamaForCausalLM"],
      hidden_size: 16,
      intermediate_size: 24,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: 40,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      max_position_embeddings: 64,
      tie_word_embeddings: false,
    },
    { seed, std: 0.2 },
  );
}

const ids = new T.Tensor(Int32Array.from([3, 7, 1, 9, 22, 5, 30, 2]), [2, 4], "i32");
const logitsOf = (m: Model) => T.noGrad(() => m.forward(ids)).toFloat32Array();

/** Give B random values so the adapter is not the identity. */
function randomizeB(adapter: ReturnType<typeof attachLora>, seed = 9) {
  const rng = new T.Rng(seed);
  for (const l of adapter.layers.values())
    (l.B.dataSync() as Float32Array).set(rng.normal(l.B.size).map((v) => v * 0.1));
}

describe("LoRA layers", () => {
  it("forward equals W x + (α/r)·B A x computed independently in float64", () => {
    const model = tinyModel();
    const adapter = attachLora(model, { r: 4, alpha: 8, targetModules: ["q_proj"], seed: 3 });
    randomizeB(adapter);
    const layer = adapter.layers.get("model.layers.0.self_attn.q_proj")!;
    const lin = adapter.linear("model.layers.0.self_attn.q_proj");
    const x = new T.Tensor(new T.Rng(4).normal(3 * 16), [3, 16]);
    const y = T.noGrad(() => lin.forward(x)).toFloat32Array();
    const W = lin.weight.toFloat32Array();
    const A = layer.A.toFloat32Array();
    const B = layer.B.toFloat32Array();
    const [out, inF, r] = [lin.outFeatures, 16, 4];
    for (let n = 0; n < 3; n++)
      for (let o = 0; o < out; o++) {
        let base = 0;
        for (let i = 0; i < inF; i++) base += W[o * inF + i] * x.dataSync()[n * inF + i];
        let lora = 0;
        for (let j = 0; j < r; j++) {
          let ax = 0;
          for (let i = 0; i < inF; i++) ax += A[j * inF + i] * x.dataSync()[n * inF + i];
          lora += B[o * r + j] * ax;
        }
        expect(Math.abs(y[n * out + o] - (base + (8 / 4) * lora))).toBeLessThan(1e-5);
      }
  });

  it("PEFT init: B = 0 (adapter starts as the identity), A ~ U(±1/√in); seeded", () => {
    const model = tinyModel();
    const base = logitsOf(model);
    const a = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear", seed: 5 });
    expect(Array.from(logitsOf(model))).toEqual(Array.from(base));
    for (const l of a.layers.values()) {
      const bound = 1 / Math.sqrt(l.A.shape[1]);
      expect(l.A.toArray().every((v) => Math.abs(v) <= bound)).toBe(true);
      expect(l.B.toArray().every((v) => v === 0)).toBe(true);
    }
    const b = attachLora(tinyModel(), { r: 4, alpha: 8, targetModules: "all-linear", seed: 5 });
    expect(b.parameters()[0].toArray()).toEqual(a.parameters()[0].toArray());
  });

  it("all-linear targets every linear but lm_head; bad targets name the model's modules", () => {
    const model = tinyModel();
    const a = attachLora(model, { r: 2, alpha: 2, targetModules: "all-linear" });
    expect(a.layers.has("lm_head")).toBe(false);
    expect(a.layers.size).toBe(2 * 7);
    expect(() => attachLora(model, { name: "x", r: 2, alpha: 2, targetModules: ["nope_proj"] })).toThrow(
      /matched no linear layer/,
    );
    expect(() => attachLora(model, { r: 2, alpha: 2, targetModules: ["q_proj"] })).toThrow(/already exists/);
    expect(() => attachLora(model, { name: "y", r: 0, alpha: 2, targetModules: ["q_proj"] })).toThrow(LoraError);
  });

  it("rsLoRA scales by α/√r; rank/alpha patterns override per module", () => {
    const model = tinyModel();
    const a = attachLora(model, {
      r: 16,
      alpha: 8,
      targetModules: ["q_proj", "v_proj"],
      useRslora: true,
      rankPattern: { v_proj: 4 },
    });
    expect(a.layers.get("model.layers.0.self_attn.q_proj")!.scaling).toBeCloseTo(8 / 4, 12);
    expect(a.layers.get("model.layers.0.self_attn.v_proj")!.scaling).toBeCloseTo(8 / 2, 12);
    expect(a.layers.get("model.layers.0.self_attn.v_proj")!.rank).toBe(4);
  });

  it("a disabled adapter equals the base model (DPO's reference policy)", () => {
    const model = tinyModel();
    const base = logitsOf(model);
    const a = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear" });
    randomizeB(a);
    const on = logitsOf(model);
    expect(Array.from(on)).not.toEqual(Array.from(base));
    expect(Array.from(a.withDisabled(() => logitsOf(model)))).toEqual(Array.from(base));
    expect(Array.from(logitsOf(model))).toEqual(Array.from(on));
  });

  it("only adapter parameters get gradients; the frozen base may be bf16", () => {
    const model = createModel(
      {
        architectures: ["LlamaForCausalLM"],
        hidden_size: 16,
        intermediate_size: 24,
        num_hidden_layers: 1,
        num_attention_heads: 4,
        num_key_value_heads: 4,
        vocab_size: 40,
        tie_word_embeddings: false,
      },
      { seed: 2, dtype: "bf16" },
    );
    const a = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear" });
    randomizeB(a);
    const logits = model.forward(ids);
    T.backward(T.crossEntropy(T.reshape(logits, [8, 40]), T.tensor([1, 2, 3, 4, 5, 6, 7, 8], [8], "i32")));
    for (const p of a.parameters()) expect(p.grad).not.toBeNull();
    for (const [, p] of model.namedParameters()) expect(p.grad).toBeNull();
    const report = parameterReport(model, [a]);
    expect(report.trainable).toBe(a.parameterCount);
    expect(report.trainablePercent).toBeGreaterThan(0);
  });
});

describe("merge, scaling, combination", () => {
  it("merge then forward equals the unmerged adapter; unmerge restores the base bit-exactly", () => {
    const model = tinyModel();
    const base = model.namedLinears().map(([, l]) => Array.from(l.weight.dataSync()));
    const a = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear" });
    randomizeB(a);
    const withAdapter = logitsOf(model);
    const report = mergeAdapter(a);
    expect(model.namedLinears().every(([, l]) => l.adapters.length === 0)).toBe(true);
    const merged = logitsOf(model);
    for (let i = 0; i < merged.length; i++) expect(Math.abs(merged[i] - withAdapter[i])).toBeLessThan(1e-4);
    expect(report.modules.length).toBe(14);
    unmergeAdapter(a, report);
    for (const [i, [, l]] of model.namedLinears().entries()) expect(Array.from(l.weight.dataSync())).toEqual(base[i]);
    expect(Array.from(logitsOf(model))).toEqual(Array.from(withAdapter));
  });

  it("training-free delta scaling: merge(scale s) equals setScale(s)", () => {
    const model = tinyModel();
    const a = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear" });
    randomizeB(a);
    a.setScale(0.85);
    const scaled = logitsOf(model);
    a.setScale(1);
    mergeAdapter(a, { scale: 0.85 });
    const merged = logitsOf(model);
    for (let i = 0; i < merged.length; i++) expect(Math.abs(merged[i] - scaled[i])).toBeLessThan(1e-4);
  });

  it("a bf16 merge reports the share of the delta it loses (a small delta is mostly lost)", () => {
    const model = tinyModel();
    const a = attachLora(model, { r: 4, alpha: 8, targetModules: ["q_proj"] });
    for (const l of a.layers.values()) (l.B.dataSync() as Float32Array).fill(1e-5);
    const report = mergeAdapter(a, { dtype: "bf16" });
    expect(report.dtype).toBe("bf16");
    expect(report.meanBf16DeltaLoss).toBeGreaterThan(0.5);
    expect(model.namedLinears().find(([n]) => n === "model.layers.0.self_attn.q_proj")![1].weight.dtype).toBe("bf16");
    const model2 = tinyModel();
    const b = attachLora(model2, { r: 4, alpha: 8, targetModules: ["q_proj"] });
    randomizeB(b, 1);
    expect(mergeAdapter(b).meanBf16DeltaLoss).toBeLessThan(0.1);
  });

  it("weighted combination is exactly Σ wᵢ sᵢ BᵢAᵢ (no cross terms)", () => {
    const model = tinyModel();
    const a1 = attachLora(model, { name: "a1", r: 2, alpha: 4, targetModules: ["q_proj", "down_proj"], seed: 1 });
    const a2 = attachLora(model, { name: "a2", r: 3, alpha: 3, targetModules: ["q_proj", "down_proj"], seed: 2 });
    randomizeB(a1, 11);
    randomizeB(a2, 12);
    const c = combineAdapters(
      model,
      [
        { adapter: a1, weight: 0.7 },
        { adapter: a2, weight: -0.4 },
      ],
      "mix",
    );
    for (const module of c.layers.keys()) {
      const got = deltaWeight(c.layers.get(module)!);
      const d1 = deltaWeight(a1.layers.get(module)!);
      const d2 = deltaWeight(a2.layers.get(module)!);
      for (let i = 0; i < got.length; i++) expect(Math.abs(got[i] - (0.7 * d1[i] - 0.4 * d2[i]))).toBeLessThan(1e-6);
    }
    expect(c.config.r).toBe(5);
  });
});

describe("PEFT files and chains", () => {
  it("saves a PEFT directory and loads it back to the same outputs", async () => {
    const model = tinyModel();
    const a = attachLora(model, {
      r: 4,
      alpha: 16,
      targetModules: ["q_proj", "v_proj", "up_proj"],
      baseModelNameOrPath: "tiny",
    });
    randomizeB(a);
    const expected = logitsOf(model);
    const dir = join(tmp, "adapter");
    await saveAdapter(a, dir);
    a.detach();
    const loaded = await loadAdapter(model, dir);
    expect(loaded.config.target_modules).toEqual(["q_proj", "up_proj", "v_proj"]);
    expect(loaded.config.r).toBe(4);
    const got = logitsOf(model);
    for (let i = 0; i < got.length; i++) expect(Math.abs(got[i] - expected[i])).toBeLessThan(1e-6);
    const second = await loadAdapter(tinyModel(), dir, { name: "x" });
    expect(second.name).toBe("x");
    expect(second.layers.size).toBe(a.layers.size);
  });

  it("loadAdapter on a missing directory or file throws a PeftError naming the path and the expected files", async () => {
    const missing = join(tmp, "no-such-adapter");
    const err = await loadAdapter(tinyModel(), missing).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PeftError);
    const message = (err as Error).message;
    expect(message).toContain(missing);
    expect(message).toContain("adapter_config.json");
    expect(message).toContain("adapter_model.safetensors");

    const half = join(tmp, "half-adapter");
    mkdirSync(half, { recursive: true });
    writeFileSync(join(half, "adapter_config.json"), "{}");
    const err2 = await loadAdapter(tinyModel(), half).catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(PeftError);
    expect((err2 as Error).message).toContain(join(half, "adapter_model.safetensors"));
  });

  it("loading an adapter for another architecture names the mismatching module", async () => {
    const model = tinyModel();
    const a = attachLora(model, { r: 2, alpha: 2, targetModules: ["q_proj"] });
    const dir = join(tmp, "adapter-mismatch");
    await saveAdapter(a, dir);
    const other = createModel({
      architectures: ["LlamaForCausalLM"],
      hidden_size: 8,
      intermediate_size: 8,
      num_hidden_layers: 2,
      num_attention_heads: 2,
      vocab_size: 40,
    });
    await expect(loadAdapter(other, dir)).rejects.toThrow(/model.layers.0.self_attn.q_proj/);
  });

  it("adapter chain: merge round 1, fresh adapter on the merged model, save every stage", async () => {
    const model = tinyModel();
    const chain = new AdapterChain(model, { name: "opd", r: 4, alpha: 4, targetModules: "all-linear", seed: 1 });
    randomizeB(chain.current, 3);
    const afterRound1 = logitsOf(model);
    const next = await chain.advance({ saveDir: join(tmp, "round-0") });
    expect(next.name).toBe("opd-1");
    expect(chain.stages[0].merge?.modules.length).toBe(14);
    const merged = logitsOf(model);
    for (let i = 0; i < merged.length; i++) expect(Math.abs(merged[i] - afterRound1[i])).toBeLessThan(1e-4);
    expect(model.namedLinears().every(([n, l]) => n === "lm_head" || l.adapters.length === 1)).toBe(true);
  });
});
