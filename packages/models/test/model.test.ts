import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fromFloat32, parseSafetensors, serializeSafetensors, type TensorData, toFloat32 } from "@kiln/hub-io";
import { Tensor, backward, mul, noGrad, sum, tokenLogProbs } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  GenerationError,
  type Linear,
  type LinearAdapter,
  SUPPORTED_ARCHITECTURES,
  UnsupportedArchitectureError,
  WeightLoadError,
  createModel,
  loadModel,
  parseDecoderConfig,
  registerBlockType,
} from "../src/index.js";
import { maxAbsDiff, tinyDir } from "./helpers.js";

function tinyFiles(name: string): Map<string, Uint8Array | string> {
  const d = tinyDir(name);
  return new Map<string, Uint8Array | string>([
    ["config.json", readFileSync(join(d, "config.json"), "utf8")],
    ["model.safetensors", new Uint8Array(readFileSync(join(d, "model.safetensors")))],
  ]);
}

function checkpointTensors(name: string): Map<string, TensorData> {
  return parseSafetensors(new Uint8Array(readFileSync(join(tinyDir(name), "model.safetensors")))).tensors;
}

describe("config", () => {
  it("lists the supported architectures when given another", () => {
    const raw = {
      architectures: ["MistralForCausalLM"],
      hidden_size: 8,
      num_attention_heads: 2,
      num_hidden_layers: 1,
      vocab_size: 4,
      intermediate_size: 4,
    };
    expect(() => parseDecoderConfig(raw)).toThrow(UnsupportedArchitectureError);
    expect(() => parseDecoderConfig(raw)).toThrow(SUPPORTED_ARCHITECTURES.join(", "));
  });

  it("reads head_dim independently of hidden_size (Qwen3) and Qwen2's implicit q/k/v biases", () => {
    const q3 = parseDecoderConfig(JSON.parse(readFileSync(join(tinyDir("qwen3"), "config.json"), "utf8")));
    expect(q3.headDim * q3.numHeads).not.toBe(q3.hiddenSize);
    expect(q3.qkNorm).toBe(true);
    const q2 = parseDecoderConfig(JSON.parse(readFileSync(join(tinyDir("qwen2"), "config.json"), "utf8")));
    expect([q2.qkvBias, q2.oBias]).toEqual([true, false]);
  });

  it("rejects unsupported rope scaling by name", () => {
    const raw = JSON.parse(readFileSync(join(tinyDir("llama"), "config.json"), "utf8"));
    raw.rope_scaling = { rope_type: "yarn", factor: 4 };
    expect(() => parseDecoderConfig(raw)).toThrow(/"yarn" is not supported/);
  });
});

describe("weights", () => {
  it("names parameters exactly as the checkpoint's state-dict keys", async () => {
    for (const name of ["llama", "qwen2", "qwen3", "llama3-scaled"]) {
      const model = await loadModel(tinyDir(name));
      const keys = [...checkpointTensors(name).keys()].sort();
      expect(
        model
          .namedParameters()
          .map(([k]) => k)
          .sort(),
      ).toEqual(keys);
      expect([...model.stateDict().keys()].sort()).toEqual(keys);
      for (const [k, t] of model.namedParameters()) expect(t.shape).toEqual(checkpointTensors(name).get(k)?.shape);
    }
  });

  it("lists linears by HF module path, lm_head included (tied or not)", async () => {
    const model = await loadModel(tinyDir("qwen2"));
    const names = model.namedLinears().map(([n]) => n);
    expect(names.slice(0, 4)).toEqual([
      "model.layers.0.self_attn.q_proj",
      "model.layers.0.self_attn.k_proj",
      "model.layers.0.self_attn.v_proj",
      "model.layers.0.self_attn.o_proj",
    ]);
    expect(names).toContain("model.layers.1.mlp.down_proj");
    expect(names.at(-1)).toBe("lm_head");
    // Tied: the head is the embedding tensor itself.
    expect(model.lmHead.weight).toBe(model.embedTokens);
    const [, q] = model.namedLinears()[0];
    expect([q.inFeatures, q.outFeatures, q.bias?.shape[0]]).toEqual([32, 32, 32]);
  });

  it("a right-padded batch gives each row's real tokens the logits and gradients of that row alone", async () => {
    const model = await loadModel(tinyDir("qwen3"));
    const vocab = model.embedTokens.shape[0];
    const rows = [
      [3, 9, 4, 1, 7, 2],
      [5, 8, 6],
    ];
    const T = 6;
    const ids = new Int32Array(rows.length * T);
    const mask = new Uint8Array(rows.length * T);
    rows.forEach((r, b) => {
      ids.set(r, b * T);
      mask.fill(1, b * T, b * T + r.length);
    });
    const params = model.requireGrad();
    // A loss that weighs every real position's logits differently, so a wrong position or row shows.
    const weight = (t: number, v: number) => Math.sin(t * vocab + v);
    const rowWeights = (n: number) =>
      new Tensor(
        Float32Array.from({ length: n * vocab }, (_, i) => weight(Math.floor(i / vocab), i % vocab)),
        [1, n, vocab],
      );
    const batched = model.forward(new Tensor(ids, [2, T], "i32"), { attentionMask: mask });
    const w = Float32Array.from({ length: 2 * T * vocab }, (_, i) => {
      const position = Math.floor(i / vocab);
      return mask[position] ? weight(position % T, i % vocab) : 0;
    });
    backward(sum(mul(batched, new Tensor(w, [2, T, vocab]))));
    const batchedGrads = params.map((p) => p.grad?.toFloat32Array() ?? new Float32Array(0));
    const logits = batched.toFloat32Array();
    for (const p of params) p.grad = null;
    for (const [b, r] of rows.entries()) {
      const out = model.forward([r]);
      const got = logits.subarray(b * T * vocab, (b * T + r.length) * vocab);
      expect(maxAbsDiff(out.toFloat32Array(), got)).toBeLessThan(1e-5);
      backward(sum(mul(out, rowWeights(r.length))));
    }
    for (const [i, p] of params.entries())
      expect(maxAbsDiff(p.grad?.toFloat32Array() ?? new Float32Array(0), batchedGrads[i])).toBeLessThan(1e-5);
    expect(batchedGrads.some((g) => g.some((v) => v !== 0))).toBe(true);
    model.requireGrad(false);
  });

  it("forward accepts plain number[][] token ids and rejects ragged or out-of-vocabulary ids by name", async () => {
    const model = await loadModel(tinyDir("qwen2"));
    const vocab = model.embedTokens.shape[0];
    const rows = [
      [1, 5, vocab - 1],
      [7, 0, 3],
    ];
    const fromTensor = model.forward(new Tensor(Int32Array.from(rows.flat()), [2, 3], "i32")).toFloat32Array();
    const fromArrays = model.forward(rows);
    expect(fromArrays.shape).toEqual([2, 3, vocab]);
    expect(maxAbsDiff(fromArrays.toFloat32Array(), fromTensor)).toBe(0);
    expect(() => model.forward([[1, 2], [3]])).toThrow(GenerationError);
    expect(() => model.forward([[1, 2], [3]])).toThrow(/rectangular; row 0 has 2 ids, row 1 has 1/);
    expect(() => model.forward([[1, vocab]])).toThrow(/ids\[0\]\[1\] = \d+ is not a token id/);
    expect(() => model.forward([[1, 2.5]])).toThrow(GenerationError);
    expect(() => model.forward([])).toThrow(GenerationError);
  });

  it("reports missing, unexpected and mis-shaped keys by name", async () => {
    const tensors = checkpointTensors("qwen3");
    tensors.delete("model.layers.1.self_attn.k_norm.weight");
    tensors.set("model.layers.0.mlp.extra.weight", { dtype: "F32", shape: [1], data: new Uint8Array(4) });
    const q = tensors.get("model.layers.0.self_attn.q_proj.weight") as TensorData;
    tensors.set("model.layers.0.self_attn.q_proj.weight", { ...q, shape: [32, 64] });
    const files = tinyFiles("qwen3");
    files.set("model.safetensors", serializeSafetensors(tensors));
    const err = await loadModel(files).catch((e) => e);
    expect(err).toBeInstanceOf(WeightLoadError);
    expect(err.missing).toEqual(["model.layers.1.self_attn.k_norm.weight"]);
    expect(err.unexpected).toEqual(["model.layers.0.mlp.extra.weight"]);
    expect(err.mismatched[0]).toMatch(/q_proj\.weight: checkpoint \[32, 64\] vs model \[64, 32\]/);
    expect(err.message).toMatch(/missing keys: model\.layers\.1\.self_attn\.k_norm\.weight/);
  });

  it("keeps BF16 checkpoint bits as they are under dtype bf16 and widens them under f32", async () => {
    const files = tinyFiles("qwen3");
    const bf16 = new Map(
      [...checkpointTensors("qwen3")].map(([name, t]) => [
        name,
        { dtype: "BF16" as const, shape: t.shape, data: fromFloat32(toFloat32(t), "BF16") },
      ]),
    );
    files.set("model.safetensors", serializeSafetensors(bf16));
    const frozen = await loadModel(files, { dtype: "bf16" });
    const wide = await loadModel(files);
    const name = "model.layers.0.mlp.up_proj.weight";
    const src = bf16.get(name)?.data as Uint8Array;
    const bits = frozen.stateDict().get(name) as Tensor;
    expect(bits.dtype).toBe("bf16");
    expect(
      Buffer.from(
        new Uint8Array(bits.dataSync().buffer, bits.dataSync().byteOffset, bits.dataSync().byteLength),
      ).equals(Buffer.from(src)),
    ).toBe(true);
    expect(wide.stateDict().get(name)?.dtype).toBe("f32");
    expect(wide.stateDict().get("model.layers.0.input_layernorm.weight")?.dtype).toBe("f32");
    const ids = new Tensor(Int32Array.from([5, 6, 7]), [1, 3], "i32");
    // Same values either way: bf16 storage widened in the kernel equals the f32 copy.
    expect(
      maxAbsDiff(noGrad(() => frozen.forward(ids)).toFloat32Array(), noGrad(() => wide.forward(ids)).toFloat32Array()),
    ).toBeLessThan(1e-5);
  });

  it("loads sharded checkpoints through model.safetensors.index.json", async () => {
    const tensors = checkpointTensors("llama");
    const names = [...tensors.keys()];
    const half = names.length >> 1;
    const pick = (ns: string[]) => new Map(ns.map((n) => [n, tensors.get(n) as TensorData]));
    const files = tinyFiles("llama");
    files.delete("model.safetensors");
    files.set("model-00001-of-00002.safetensors", serializeSafetensors(pick(names.slice(0, half))));
    files.set("model-00002-of-00002.safetensors", serializeSafetensors(pick(names.slice(half))));
    const weightMap = Object.fromEntries(
      names.map((n, i) => [n, i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors"]),
    );
    files.set("model.safetensors.index.json", JSON.stringify({ metadata: {}, weight_map: weightMap }));
    const sharded = await loadModel(files);
    const plain = await loadModel(tinyDir("llama"));
    const ids = new Tensor(Int32Array.from([1, 2, 3]), [1, 3], "i32");
    expect(
      maxAbsDiff(
        noGrad(() => sharded.forward(ids)).toFloat32Array(),
        noGrad(() => plain.forward(ids)).toFloat32Array(),
      ),
    ).toBe(0);
  });
});

describe("block types", () => {
  it("a registered block type is built, run and named like the built-in one", () => {
    registerBlockType({
      layerType: "test_scale",
      shapes: (c, p) => [[`${p}scale.weight`, [c.hiddenSize]]],
      build: (_c, p, take) => {
        const w = take(`${p}scale.weight`);
        return {
          layerType: "test_scale",
          forward: (x) => mul(x, w),
          namedLinears: () => [],
          namedParameters: (prefix) => [[`${prefix}scale.weight`, w]],
        };
      },
    });
    const config = {
      ...JSON.parse(readFileSync(join(tinyDir("llama"), "config.json"), "utf8")),
      layer_types: ["full_attention", "test_scale"],
    };
    const model = createModel(config, { seed: 2 });
    expect(model.namedParameters().map(([n]) => n)).toContain("model.layers.1.scale.weight");
    expect(model.namedLinears().some(([n]) => n.startsWith("model.layers.1."))).toBe(false);
    const logits = noGrad(() => model.forward(new Tensor(Int32Array.from([1, 2]), [1, 2], "i32")));
    expect(logits.shape).toEqual([1, 2, 96]);
    expect(() => parseDecoderConfig({ ...config, layer_types: ["full_attention", "mamba"] })).toThrow(
      /"mamba" is not supported; supported: full_attention, linear_attention, test_scale/,
    );
  });
});

describe("Linear adapters and training hooks", () => {
  it("adds enabled adapters' output to the base output", async () => {
    const model = await loadModel(tinyDir("llama"));
    const ids = new Tensor(Int32Array.from([4, 8, 15, 16]), [1, 4], "i32");
    const base = noGrad(() => model.forward(ids)).toFloat32Array();
    const lin = model.namedLinears().find(([n]) => n === "model.layers.0.self_attn.v_proj")?.[1] as Linear;
    const adapter: LinearAdapter = {
      name: "shift",
      enabled: true,
      forward: (x) =>
        new Tensor(new Float32Array((x.size / lin.inFeatures) * lin.outFeatures).fill(0.5), [
          ...x.shape.slice(0, -1),
          lin.outFeatures,
        ]),
    };
    lin.adapters.push(adapter);
    const adapted = noGrad(() => model.forward(ids)).toFloat32Array();
    expect(maxAbsDiff(adapted, base)).toBeGreaterThan(1e-3);
    adapter.enabled = false;
    expect(maxAbsDiff(noGrad(() => model.forward(ids)).toFloat32Array(), base)).toBe(0);
  });

  it("checkpointLayers gives the same loss gradients as storing activations", () => {
    const config = JSON.parse(readFileSync(join(tinyDir("qwen3"), "config.json"), "utf8"));
    const grads = (checkpointLayers: boolean) => {
      const model = createModel(config, { seed: 1, std: 0.2 });
      const params = model.requireGrad(true);
      const ids = new Tensor(Int32Array.from([3, 1, 4, 1, 5, 9]), [1, 6], "i32");
      const logits = model.forward(ids, { checkpointLayers });
      const lp = tokenLogProbs(logits, new Tensor(Int32Array.from([1, 4, 1, 5, 9, 2]), [1, 6], "i32"));
      backward(sum(lp));
      return params.map((p) => p.grad?.toFloat32Array() ?? new Float32Array(0));
    };
    const a = grads(false);
    const b = grads(true);
    expect(a.length).toBeGreaterThan(10);
    a.forEach((g, i) => {
      expect(g.length).toBeGreaterThan(0);
      expect(maxAbsDiff(g, b[i])).toBeLessThan(1e-5);
    });
  });
});
