import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseSafetensors, toFloat32 } from "@kiln/hub-io";

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "fixtures");
export const TINY = ["llama", "llama3-scaled", "qwen2", "qwen3"] as const;

export function tinyDir(name: string): string {
  return join(FIXTURES, "tiny", name);
}

export interface Expected {
  ids: Int32Array;
  mask: Int32Array;
  logits: Float32Array;
  B: number;
  T: number;
  V: number;
}

export function readExpected(name: string): Expected {
  const { tensors } = parseSafetensors(new Uint8Array(readFileSync(join(tinyDir(name), "expected.safetensors"))));
  const ids = tensors.get("input_ids");
  const mask = tensors.get("attention_mask");
  const logits = tensors.get("logits");
  if (!ids || !mask || !logits) throw new Error(`expected.safetensors of ${name} is incomplete`);
  const i32 = (d: Uint8Array) => new Int32Array(d.buffer.slice(d.byteOffset, d.byteOffset + d.byteLength));
  const [B, T, V] = logits.shape;
  return { ids: i32(ids.data), mask: i32(mask.data), logits: Float32Array.from(toFloat32(logits)), B, T, V };
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/**
 * A Qwen3 small enough for the js backend, with two KV heads and a qk-norm so every attention path of the
 * batching scheduler is exercised (vocabulary 97, eos 96).
 */
export const SCHEDULER_TEST_CONFIG = {
  architectures: ["Qwen3ForCausalLM"],
  model_type: "qwen3",
  vocab_size: 97,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  eos_token_id: 96,
};
