// PEFT adapter_config fields are applied exactly as PEFT does or refused by name, never ignored:
// modules_to_save copies (and saved biases) replace the base's tensors while the adapter is on and in
// a merge; every other LoraConfig field kiln does not apply is refused naming the field.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type LoraAdapterConfig,
  PeftError,
  type TensorData,
  fromFloat32,
  loraConfig,
  peftKey,
  writePeftAdapter,
} from "@kiln/hub-io";
import { type Model, createModel } from "@kiln/models";
import * as T from "@kiln/tensor";
import { afterAll, describe, expect, it } from "vitest";
import { LoraError, combineAdapters, loadAdapter, mergeAdapter, saveAdapter, unmergeAdapter } from "../src/index.js";

const tmp = mkdtempSync(join(tmpdir(), "kiln-mts-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const V = 40;
const H = 16;

function tinyModel(options: { tied?: boolean; arch?: string; seed?: number } = {}): Model {
  return createModel(
    {
      architectures: [options.arch ?? "LlamaForCausalLM"],
      hidden_size: H,
      intermediate_size: 24,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: V,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      max_position_embeddings: 64,
      tie_word_embeddings: options.tied ?? false,
    },
    { seed: options.seed ?? 1, std: 0.2 },
  );
}

const f32 = (shape: number[], seed: number): TensorData => ({
  dtype: "F32",
  shape,
  data: fromFloat32(
    Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(seed * 7.1 + i * 0.37)),
    "F32",
  ),
});
const values = (t: TensorData) => Array.from(new Float32Array(t.data.slice().buffer));
const tensorValues = (t: T.Tensor) => Array.from(t.toFloat32Array());

const Q = "model.layers.0.self_attn.q_proj";
const EMBED = "base_model.model.model.embed_tokens.weight";
const HEAD = "base_model.model.lm_head.weight";

let dirCount = 0;
/** An adapter directory as PEFT writes it: LoRA on layer 0's q_proj plus the given extra tensors. */
async function adapterDir(config: Partial<LoraAdapterConfig>, other: Record<string, TensorData> = {}) {
  const dir = join(tmp, `a${dirCount++}`);
  const cfg = loraConfig({ r: 2, lora_alpha: 4, target_modules: ["q_proj"], task_type: "CAUSAL_LM", ...config });
  const layers = new Map([[Q, { A: f32([2, H], 1), B: f32([H, 2], 2) }]]);
  await writePeftAdapter(dir, { config: cfg, layers, other: new Map(Object.entries(other)) });
  return dir;
}

const ids = new T.Tensor(Int32Array.from([3, 7, 1, 9, 22, 5, 30, 2]), [2, 4], "i32");
const logitsOf = (m: Model) => T.noGrad(() => m.forward(ids)).toFloat32Array();

describe("modules_to_save", () => {
  const embed = f32([V, H], 11);
  const head = f32([V, H], 12);

  it("an adapter saving embed_tokens and lm_head merges to a model whose embeddings and head are the adapter's", async () => {
    const dir = await adapterDir({ modules_to_save: ["embed_tokens", "lm_head"] }, { [EMBED]: embed, [HEAD]: head });
    const model = tinyModel();
    const baseEmbed = tensorValues(model.stateDict().get("model.embed_tokens.weight")!);
    const adapter = await loadAdapter(model, dir);
    expect(adapter.replacements.map((r) => r.key).sort()).toEqual(["lm_head.weight", "model.embed_tokens.weight"]);
    const served = logitsOf(model); // kiln serve --adapter: the copies are live while the adapter is on
    mergeAdapter(adapter, { keepOriginal: false });
    const state = model.stateDict();
    expect(tensorValues(state.get("model.embed_tokens.weight")!)).toEqual(values(embed));
    expect(tensorValues(state.get("lm_head.weight")!)).toEqual(values(head));
    expect(tensorValues(state.get("model.embed_tokens.weight")!)).not.toEqual(baseEmbed);
    const merged = logitsOf(model);
    // Same function up to f32 rounding of W + ΔW versus x·W + x·ΔW.
    expect(Math.max(...merged.map((v, i) => Math.abs(v - served[i])))).toBeLessThan(1e-4);
    for (const [name, lin] of model.namedLinears()) expect(lin.adapters, name).toEqual([]);
  });

  it("is what the forward uses: the same logits as a base whose tensors were swapped by hand", async () => {
    const dir = await adapterDir({ modules_to_save: ["embed_tokens"] }, { [EMBED]: embed });
    const model = tinyModel();
    const base = logitsOf(model);
    const adapter = await loadAdapter(model, dir);
    const withAdapter = logitsOf(model);
    // Reference: a fresh base with only the LoRA delta, and the embedding set by hand.
    const ref = tinyModel();
    ref.replaceParameter("model.embed_tokens.weight", new T.Tensor(new Float32Array(values(embed)), [V, H]));
    await loadAdapter(ref, await adapterDir({}));
    expect(withAdapter).toEqual(logitsOf(ref));
    // Off (the DPO reference policy) means the base's own embedding again, as PEFT's disable_adapter.
    expect(adapter.withDisabled(() => logitsOf(model))).toEqual(base);
    expect(logitsOf(model)).toEqual(withAdapter);
    adapter.detach();
    expect(logitsOf(model)).toEqual(base);
  });

  it("unmerge puts the LoRA branch back with the copy still active; save writes the copy back", async () => {
    const dir = await adapterDir({ modules_to_save: ["embed_tokens"] }, { [EMBED]: embed });
    const model = tinyModel();
    const adapter = await loadAdapter(model, dir);
    const on = logitsOf(model);
    const report = mergeAdapter(adapter);
    unmergeAdapter(adapter, report);
    expect(logitsOf(model)).toEqual(on);
    const again = join(tmp, "saved-again");
    await saveAdapter(adapter, again);
    const fresh = tinyModel();
    await loadAdapter(fresh, again);
    expect(logitsOf(fresh)).toEqual(on);
  });

  it("a tied model: refused unless ensure_weight_tying, then both sides use the copy", async () => {
    const refused = await adapterDir({ modules_to_save: ["embed_tokens"] }, { [EMBED]: embed });
    await expect(loadAdapter(tinyModel({ tied: true }), refused)).rejects.toThrow(
      /tie_word_embeddings.*ensure_weight_tying/,
    );
    const tiedOk = await adapterDir(
      { modules_to_save: ["embed_tokens"], ensure_weight_tying: true },
      { [EMBED]: embed },
    );
    const model = tinyModel({ tied: true });
    const adapter = await loadAdapter(model, tiedOk);
    mergeAdapter(adapter, { keepOriginal: false });
    expect(tensorValues(model.embedTokens)).toEqual(values(embed));
    expect(model.lmHead.weight).toBe(model.embedTokens);
  });

  it("refuses by name: a copy of a different shape, a module the model lacks, a second adapter replacing the same tensor, training, combining, and the layer it replaces failing", async () => {
    const wrongShape = await adapterDir({ modules_to_save: ["embed_tokens"] }, { [EMBED]: f32([V + 2, H], 3) });
    await expect(loadAdapter(tinyModel(), wrongShape)).rejects.toThrow(/vocabulary resized/);
    const missing = await adapterDir(
      { modules_to_save: ["classifier"] },
      { "base_model.model.classifier.weight": f32([2, H], 3) },
    );
    await expect(loadAdapter(tinyModel(), missing)).rejects.toThrow(/has no parameter "classifier.weight"/);
    const notReplaceable = await adapterDir(
      { modules_to_save: ["input_layernorm"] },
      { "base_model.model.model.layers.0.input_layernorm.weight": f32([H], 3) },
    );
    const m0 = tinyModel();
    const before = logitsOf(m0);
    await expect(loadAdapter(m0, notReplaceable)).rejects.toThrow(LoraError);
    expect(logitsOf(m0)).toEqual(before); // nothing attached, nothing replaced
    const dir = await adapterDir({ modules_to_save: ["embed_tokens"] }, { [EMBED]: embed });
    const model = tinyModel();
    const first = await loadAdapter(model, dir, { name: "one" });
    await expect(loadAdapter(model, dir, { name: "two" })).rejects.toThrow(/already replaces/);
    await expect(loadAdapter(tinyModel(), dir, { trainable: true })).rejects.toThrow(/training those copies/);
    expect(() => combineAdapters(model, [{ adapter: first, weight: 1 }], "c")).toThrow(/modules_to_save/);
  });

  it("bias 'all': saved biases replace the base's (Qwen2 q/k/v biases; PEFT names a LoRA layer's own bias base_layer.bias)", async () => {
    const qBias = f32([H], 5);
    const kBias = f32([8], 6);
    const K = "model.layers.1.self_attn.k_proj";
    const dir = await adapterDir(
      { bias: "all" },
      { [`base_model.model.${Q}.base_layer.bias`]: qBias, [`base_model.model.${K}.bias`]: kBias },
    );
    const model = tinyModel({ arch: "Qwen2ForCausalLM" });
    const adapter = await loadAdapter(model, dir);
    mergeAdapter(adapter, { keepOriginal: false });
    expect(tensorValues(model.stateDict().get(`${Q}.bias`)!)).toEqual(values(qBias));
    expect(tensorValues(model.stateDict().get(`${K}.bias`)!)).toEqual(values(kBias));
  });
});

describe("adapter_config fields kiln does not apply are refused by name", () => {
  const refused: [Partial<LoraAdapterConfig>, string][] = [
    [{ use_dora: true }, "use_dora"],
    [{ lora_bias: true }, "lora_bias"],
    [{ use_qalora: true }, "use_qalora"],
    [{ layer_replication: [[0, 1]] }, "layer_replication"],
    [{ target_parameters: ["experts.gate_up_proj"] }, "target_parameters"],
    [{ trainable_token_indices: [1, 2] }, "trainable_token_indices"],
    [{ alora_invocation_tokens: [5] }, "alora_invocation_tokens"],
    [{ megatron_config: { tp: 2 } }, "megatron_config"],
    [{ loftq_config: { loftq_bits: 4 } }, "loftq_config"],
    [{ init_lora_weights: "pissa" }, "init_lora_weights"],
    [{ init_lora_weights: "olora" }, "init_lora_weights"],
    [{ some_future_field: 3 }, "some_future_field"],
  ];
  for (const [config, field] of refused) {
    it(`${JSON.stringify(config)} → PeftError naming "${field}"`, async () => {
      const dir = join(tmp, `refused-${field}-${dirCount++}`);
      // Written by hand: loraConfig itself refuses these.
      const { mkdirSync, writeFileSync } = await import("node:fs");
      mkdirSync(dir);
      writeFileSync(
        join(dir, "adapter_config.json"),
        JSON.stringify({ peft_type: "LORA", r: 2, lora_alpha: 4, target_modules: ["q_proj"], ...config }),
      );
      const { serializeSafetensors } = await import("@kiln/hub-io");
      writeFileSync(
        join(dir, "adapter_model.safetensors"),
        serializeSafetensors({ [peftKey(Q, "lora_A")]: f32([2, H], 1), [peftKey(Q, "lora_B")]: f32([H, 2], 2) }),
      );
      const err = await loadAdapter(tinyModel(), dir).catch((e) => e);
      expect(err).toBeInstanceOf(PeftError);
      expect((err as Error).message).toContain(`"${field}"`);
    });
  }

  it("inert fields at their defaults, and PEFT's own metadata, load", async () => {
    const dir = await adapterDir({
      use_dora: false,
      lora_bias: false,
      layer_replication: null,
      loftq_config: {},
      megatron_config: null,
      megatron_core: "megatron.core",
      target_parameters: null,
      trainable_token_indices: null,
      revision: null,
      peft_version: "0.17.1",
      fan_in_fan_out: false,
      init_lora_weights: "gaussian",
      runtime_config: { ephemeral_gpu_offload: false },
    });
    expect((await loadAdapter(tinyModel(), dir)).layers.size).toBe(1);
  });

  it("a saved tensor that is neither LoRA, a modules_to_save copy nor a bias (LoRA on an embedding) is refused", async () => {
    const dir = await adapterDir({}, { "base_model.model.model.embed_tokens.lora_embedding_A": f32([2, V], 1) });
    await expect(loadAdapter(tinyModel(), dir)).rejects.toThrow(/lora_embedding_A.*refuses rather than ignore/);
  });

  it("layers_to_transform and exclude_modules are applied as PEFT applies them to the saved weights", async () => {
    const layer0 = await loadAdapter(tinyModel(), await adapterDir({ layers_to_transform: [0] }));
    expect(layer0.layers.size).toBeGreaterThan(0);
    for (const key of layer0.layers.keys()) expect(key).toMatch(/layers\.0\./);
    await expect(loadAdapter(tinyModel(), await adapterDir({ layers_to_transform: 1 }))).rejects.toThrow(
      /layers_to_transform 1 .*excludes layer 0/,
    );
    await expect(
      loadAdapter(tinyModel(), await adapterDir({ layers_to_transform: [0], layers_pattern: "blocks" })),
    ).rejects.toThrow(/finds no layer index/);
    await expect(loadAdapter(tinyModel(), await adapterDir({ exclude_modules: ["q_proj"] }))).rejects.toThrow(
      /matches exclude_modules/,
    );
  });
});
