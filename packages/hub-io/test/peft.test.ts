import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  PeftError,
  SafetensorsFile,
  buildPeftAdapterFiles,
  checkAdapterAgainstBase,
  convertLlama2cToHf,
  fromFloat32,
  loraConfig,
  loraScaling,
  matchesTargetModules,
  parseAdapterConfig,
  parsePeftAdapter,
  parsePeftKey,
  parseSafetensors,
  peftKey,
  readPeftAdapter,
  serializeAdapterConfig,
  serializeSafetensors,
  writePeftAdapter,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);
const peftConfigText = readFileSync(new URL("./fixtures/peft/adapter_config.json", import.meta.url), "utf8");

const f32 = (shape: number[], seed: number) => ({
  dtype: "F32" as const,
  shape,
  data: fromFloat32(
    Float32Array.from({ length: shape[0] * shape[1] }, (_, i) => Math.sin(seed + i)),
    "F32",
  ),
});

describe("PEFT adapter files", () => {
  it("reads a config PEFT wrote and re-serializes it byte for byte (inference_mode forced true on save)", () => {
    const cfg = parseAdapterConfig(peftConfigText);
    expect(cfg).toMatchObject({ peft_type: "LORA", r: 32, lora_alpha: 64, task_type: "CAUSAL_LM", use_rslora: false });
    expect(cfg.megatron_core).toBe("megatron.core"); // unknown keys are kept
    const want = peftConfigText.replace('"inference_mode": false', '"inference_mode": true').replace(/\n$/, "");
    expect(serializeAdapterConfig(cfg)).toBe(want);
  });

  it("fills PEFT defaults and validates fields", () => {
    const cfg = loraConfig({ r: 4, lora_alpha: 8, target_modules: ["q_proj", "v_proj"], task_type: "CAUSAL_LM" });
    expect(cfg.bias).toBe("none");
    expect(cfg.lora_dropout).toBe(0);
    expect(serializeAdapterConfig(cfg)).toContain('"lora_dropout": 0.0,');
    expect(() => loraConfig({ r: 0 })).toThrow(/"r" must be a positive integer/);
    expect(() => loraConfig({ bias: "some" as never })).toThrow(/"bias"/);
    expect(() => parseAdapterConfig('{"peft_type":"IA3"}')).toThrow(/peft_type/);
    expect(() => parseAdapterConfig("nope")).toThrow(PeftError);
  });

  it("computes scaling with rslora and rank/alpha patterns", () => {
    const cfg = loraConfig({
      r: 16,
      lora_alpha: 32,
      rank_pattern: { "layers.0.self_attn.q_proj": 4 },
      alpha_pattern: { v_proj: 2 },
    });
    expect(loraScaling(cfg, "model.layers.1.self_attn.q_proj")).toBe(2);
    expect(loraScaling(cfg, "model.layers.0.self_attn.q_proj")).toBe(8);
    expect(loraScaling(cfg, "model.layers.3.self_attn.v_proj")).toBe(2 / 16);
    expect(loraScaling({ ...cfg, use_rslora: true }, "model.layers.1.self_attn.q_proj")).toBe(32 / 4);
    expect(matchesTargetModules("model.layers.0.self_attn.q_proj", ["q_proj"])).toBe(true);
    expect(matchesTargetModules("model.layers.0.self_attn.xq_proj", ["q_proj"])).toBe(false);
    expect(matchesTargetModules("model.layers.0.mlp.up_proj", ".*\\.(up|down)_proj")).toBe(true);
    expect(matchesTargetModules("model.layers.0.mlp.up_proj", "up_proj")).toBe(false);
  });

  it("maps module paths to PEFT keys and back", () => {
    const k = peftKey("model.layers.0.self_attn.q_proj", "lora_A");
    expect(k).toBe("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    expect(parsePeftKey(k)).toEqual({ module: "model.layers.0.self_attn.q_proj", part: "lora_A" });
    expect(parsePeftKey("base_model.model.lm_head.modules_to_save.default.weight")).toBeUndefined();
    expect(parsePeftKey("model.layers.0.self_attn.q_proj.lora_A.weight")).toBeUndefined();
  });

  it("writes an adapter for the converted stories260K model and reads it back with PEFT names and shapes", async () => {
    const base = convertLlama2cToHf(
      new Uint8Array(readFileSync(new URL("../../models/data/stories260K/stories260K.bin", import.meta.url))),
    );
    const baseFile = await SafetensorsFile.open(base.files.get("model.safetensors") as Uint8Array);
    const r = 4;
    const layers = new Map<string, { A: ReturnType<typeof f32>; B: ReturnType<typeof f32> }>();
    for (let l = 0; l < 5; l++) {
      for (const [proj, out] of [
        ["q_proj", 64],
        ["v_proj", 32],
      ] as const) {
        layers.set(`model.layers.${l}.self_attn.${proj}`, { A: f32([r, 64], l), B: f32([out, r], l + 10) });
      }
    }
    const config = loraConfig({
      r,
      lora_alpha: 8,
      target_modules: ["q_proj", "v_proj"],
      task_type: "CAUSAL_LM",
      base_model_name_or_path: "karpathy/tinyllamas",
    });
    const dir = join(tmp.dir, "adapter");
    await writePeftAdapter(dir, { config, layers });
    const weights = new Uint8Array(readFileSync(join(dir, "adapter_model.safetensors")));
    const parsed = parseSafetensors(weights);
    expect(parsed.metadata).toEqual({ format: "pt" });
    expect(parsed.tensors.get("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight")?.shape).toEqual([
      32, 4,
    ]);
    expect(parsed.tensors.get("base_model.model.model.layers.4.self_attn.q_proj.lora_A.weight")?.shape).toEqual([
      4, 64,
    ]);
    const back = await readPeftAdapter(dir);
    expect(back.layers.size).toBe(10);
    expect(back.config.inference_mode).toBe(true);
    expect(back.layers.get("model.layers.2.self_attn.q_proj")?.B.data).toEqual(
      layers.get("model.layers.2.self_attn.q_proj")?.B.data,
    );
    checkAdapterAgainstBase(back, (n) => (baseFile.has(n) ? baseFile.info(n).shape : undefined));
    // Wrong base: v_proj is [32, 64], so an adapter shaped for q_proj there is refused.
    const wrong = new Map(layers);
    wrong.set("model.layers.0.self_attn.v_proj", { A: f32([r, 64], 1), B: f32([64, r], 2) });
    const wrongAdapter = parsePeftAdapter(
      serializeAdapterConfig(config),
      buildPeftAdapterFiles({ config, layers: wrong }).get("adapter_model.safetensors") as Uint8Array,
    );
    expect(() =>
      checkAdapterAgainstBase(wrongAdapter, (n) => (baseFile.has(n) ? baseFile.info(n).shape : undefined)),
    ).toThrow(/module "model.layers.0.self_attn.v_proj": base weight is \[32,64\]/);
    await baseFile.close();
  });

  it("refuses adapters with a missing half or a rank that disagrees with the config", () => {
    const cfg = loraConfig({ r: 4 });
    const only = serializeSafetensors({ [peftKey("m.q_proj", "lora_A")]: f32([4, 8], 0) });
    expect(() => parsePeftAdapter(serializeAdapterConfig(cfg), only)).toThrow(
      /"base_model.model.m.q_proj.lora_B.weight" is missing/,
    );
    const badRank = serializeSafetensors({
      [peftKey("m.q_proj", "lora_A")]: f32([2, 8], 0),
      [peftKey("m.q_proj", "lora_B")]: f32([8, 2], 0),
    });
    expect(() => parsePeftAdapter(serializeAdapterConfig(cfg), badRank)).toThrow(/rank 2 but the config says r = 4/);
  });
});

describe("an adapter saved by PEFT (GPT-2, SEQ_CLS, fan_in_fan_out)", () => {
  const dir = new URL("./fixtures/peft/gpt2-seqcls/", import.meta.url);
  const configText = readFileSync(new URL("adapter_config.json", dir), "utf8");
  const header = new Uint8Array(readFileSync(new URL("adapter_model.header.bin", dir)));

  it("re-serializes adapter_config.json byte for byte", () => {
    const cfg = parseAdapterConfig(configText);
    expect(cfg).toMatchObject({
      r: 8,
      lora_alpha: 8,
      fan_in_fan_out: true,
      target_modules: ["c_attn"],
      task_type: "SEQ_CLS",
    });
    expect(serializeAdapterConfig(cfg)).toBe(configText);
  });

  it("writes the same safetensors header for the same tensors, and reads the layers back", () => {
    const n = Number(new DataView(header.buffer, header.byteOffset).getBigUint64(0, true));
    const entries = Object.entries(JSON.parse(new TextDecoder().decode(header.subarray(8, 8 + n)))).filter(
      ([k]) => k !== "__metadata__",
    ) as [string, { dtype: "F32"; shape: number[]; data_offsets: [number, number] }][];
    const tensors = new Map(
      entries.map(([k, v]) => [
        k,
        { dtype: v.dtype, shape: v.shape, data: new Uint8Array(v.data_offsets[1] - v.data_offsets[0]) },
      ]),
    );
    const bytes = serializeSafetensors(tensors, { format: "pt" });
    expect(Buffer.from(bytes.subarray(0, header.byteLength)).equals(header)).toBe(true);
    const adapter = parsePeftAdapter(configText, bytes);
    expect(adapter.layers.size).toBe(12);
    expect(adapter.layers.get("transformer.h.11.attn.c_attn")?.B.shape).toEqual([2304, 8]);
    expect([...adapter.other.keys()]).toEqual(["base_model.model.score.weight"]);
    // GPT-2's Conv1D stores c_attn as [in 768, out 2304].
    checkAdapterAgainstBase(adapter, (name) => (name.endsWith("c_attn.weight") ? [768, 2304] : undefined));
    expect(() => checkAdapterAgainstBase(adapter, () => [2304, 768])).toThrow(/base weight is \[2304,768\]/);
  });
});
