// Values that would otherwise give silent garbage are refused with typed errors naming the field.
import { describe, expect, it } from "vitest";
import {
  buildPeftAdapterFiles,
  fromFloat32,
  loraConfig,
  PeftError,
  parseAdapterConfig,
  parsePeftAdapter,
  parseSafetensors,
  SafetensorsError,
  serializeSafetensors,
  type TensorData,
} from "../src/index.js";

const r = 2;
const f32 = (shape: number[], fill = (i: number) => Math.sin(i + 1)): TensorData => {
  const n = shape.reduce((a, b) => a * b, 1);
  return {
    dtype: "F32",
    shape,
    data: fromFloat32(
      Float32Array.from({ length: n }, (_, i) => fill(i)),
      "F32",
    ),
  };
};
const layer = () => ({ A: f32([r, 4]), B: f32([6, r]) });
const adapter = (
  config: Record<string, unknown> = {},
  layers = new Map([["model.layers.0.self_attn.q_proj", layer()]]),
) => {
  const files = buildPeftAdapterFiles({
    config: loraConfig({ r, lora_alpha: 4, target_modules: ["q_proj"] }),
    layers,
  });
  const cfg = { ...JSON.parse(files.get("adapter_config.json") as string), ...config };
  return { config: JSON.stringify(cfg), weights: files.get("adapter_model.safetensors") as Uint8Array };
};

describe("PEFT adapters", () => {
  it("a valid adapter parses", () => {
    const a = adapter();
    expect(parsePeftAdapter(a.config, a.weights).layers.size).toBe(1);
  });

  it("refuses lora_alpha 0 or negative, DoRA, and bad rank/alpha patterns, naming the field", () => {
    for (const [cfg, field] of [
      [{ lora_alpha: 0 }, "lora_alpha"],
      [{ lora_alpha: -8 }, "lora_alpha"],
      [{ use_dora: true }, "use_dora"],
      [{ rank_pattern: { "q_proj(": 4 } }, "rank_pattern.q_proj("],
      [{ alpha_pattern: { "[": 4 } }, "alpha_pattern.["],
      [{ rank_pattern: { q_proj: 0 } }, "rank_pattern.q_proj"],
      [{ alpha_pattern: { q_proj: -1 } }, "alpha_pattern.q_proj"],
      [{ target_modules: "(q_proj" }, "target_modules"],
    ] as const) {
      const a = adapter(cfg);
      let err: unknown;
      try {
        parseAdapterConfig(a.config);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(cfg)).toBeInstanceOf(PeftError);
      expect((err as Error).message).toContain(`"${field}"`);
    }
    expect(() => parseAdapterConfig(adapter({ use_dora: true }).config)).toThrow(/DoRA adapters are not supported/);
  });

  it("refuses NaN weights, weights for modules outside target_modules, and adapters with no LoRA tensors", () => {
    const nan = adapter(
      {},
      new Map([
        ["model.layers.0.self_attn.q_proj", { A: f32([r, 4], (i) => (i === 3 ? Number.NaN : 1)), B: f32([6, r]) }],
      ]),
    );
    expect(() => parsePeftAdapter(nan.config, nan.weights)).toThrow(
      /lora_A\.weight" holds a non-finite value \(NaN\) at index 3/,
    );
    const other = adapter({ target_modules: ["v_proj"] });
    expect(() => parsePeftAdapter(other.config, other.weights)).toThrow(/does not match target_modules \["v_proj"\]/);
    const regex = adapter({ target_modules: ".*\\.k_proj" });
    expect(() => parsePeftAdapter(regex.config, regex.weights)).toThrow(PeftError);
    const empty = serializeSafetensors(new Map([["base_model.model.lm_head.weight", f32([2, 2])]]));
    expect(() => parsePeftAdapter(adapter().config, empty)).toThrow(/holds no LoRA tensors/);
  });
});

describe("safetensors headers", () => {
  it("refuse duplicate tensor names instead of keeping the last", () => {
    const good = serializeSafetensors(new Map([["a", f32([1])]]));
    const n = Number(new DataView(good.buffer, good.byteOffset).getBigUint64(0, true));
    const header = new TextDecoder().decode(good.subarray(8, 8 + n)).trimEnd();
    const entry = header.slice(header.indexOf('"a":'), header.length - 1);
    const data = good.subarray(8 + n);
    const file = (headerText: string) => {
      const padded = headerText.padEnd(Math.ceil(headerText.length / 8) * 8, " ");
      const bytes = new Uint8Array(8 + padded.length + data.length);
      new DataView(bytes.buffer).setBigUint64(0, BigInt(padded.length), true);
      bytes.set(new TextEncoder().encode(padded), 8);
      bytes.set(data, 8 + padded.length);
      return bytes;
    };
    const dup = `${header.slice(0, -1)},${entry}}`;
    let err: unknown;
    try {
      parseSafetensors(file(dup));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SafetensorsError);
    expect(err).toMatchObject({ rule: "DuplicateTensor", tensor: "a" });
    // An escaped spelling of the same name is the same key.
    expect(() => parseSafetensors(file(dup.replace(/,"a":/, ',"\\u0061":')))).toThrow(/DuplicateTensor/);
  });
});
