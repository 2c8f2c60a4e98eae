// Batched autoregressive generation with a KV cache: left-padded prompts, one prefill, then one
// token per step per unfinished row. Log-probs are the model's own (log-softmax of the raw
// logits, before penalty/temperature/filters), i.e. what `scoreCompletions` returns for the
// same tokens — the quantity RL and distillation need.
import { Rng, Tensor } from "@kiln/tensor";
import type { CausalLM } from "./causal-lm.js";
import { GenerationError } from "./errors.js";
import { type HostReads, readAsync, readSync } from "./host-read.js";
import { type GenerationOutput, RowDecoder } from "./row-decoder.js";
import { RunCRng } from "./runc-sampler.js";
import { type SamplingParams, checkSamplingParams } from "./sampling.js";
import type { Tokenizer } from "./tokenizer.js";

export interface GenerateOptions extends SamplingParams {
  /** Default 64. */
  maxNewTokens?: number;
  /** Row b draws from Rng(seed, stream b); `seeds` gives each row its own seed instead (stream 0). */
  seed?: number;
  seeds?: number[];
  /**
   * "runc": llama2.c run.c's sampler and RNG, so a run.c sample with the same seed is reproduced
   * token for token on f32 logits (temperature and topP only; each row seeded with `seeds[b]` or
   * `seed`, which must be > 0). Default "default": kiln's Rng and transformers' processor order.
   */
  sampler?: "default" | "runc";
  /** Tokens that end a row (kept in tokenIds, left out of text). Default: tokenizer eos + config eos ids. */
  stopTokenIds?: number[];
  /** Strings that end a row; the text is cut before the first one. Needs a tokenizer. */
  stopStrings?: string[];
  /** Also return this many most likely alternatives per step (raw log-probs). */
  topLogprobs?: number;
  tokenizer?: Tokenizer;
  /** Id used for left padding (masked, so any valid id works). Default tokenizer pad, else 0. */
  padTokenId?: number;
  /** Called after each step with the row and its new token. */
  onToken?: (row: number, tokenId: number) => void;
}

export type { GenerationOutput, TokenAlternative } from "./row-decoder.js";

/** The token ids that end a row: `stopTokenIds`, else the config's and the tokenizer's eos. */
export function stopIdsFor(model: CausalLM, options: Pick<GenerateOptions, "stopTokenIds" | "tokenizer">): Set<number> {
  if (options.stopTokenIds) return new Set(options.stopTokenIds);
  const ids = new Set(model.config.eosTokenIds);
  const eos = options.tokenizer?.eosTokenId;
  if (eos !== null && eos !== undefined) ids.add(eos);
  return ids;
}

/**
 * The generation loop as a generator: it yields each step's logits tensor and expects that tensor's f32 values
 * back, so `generate` can read them synchronously and `generateAsync` can await them (device backends).
 */
function* generationSteps(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  options: GenerateOptions,
): HostReads<GenerationOutput[]> {
  checkSamplingParams(options);
  const B = prompts.length;
  if (B === 0) return [];
  const V = model.config.vocabSize;
  for (const [b, p] of prompts.entries()) {
    if (p.length === 0) throw new GenerationError(`generate: prompt ${b} is empty`);
    for (const id of p)
      if (!(Number.isInteger(id) && id >= 0 && id < V))
        throw new GenerationError(`generate: prompt ${b} has token ${id} outside [0, ${V})`);
  }
  const maxNew = options.maxNewTokens ?? 64;
  if (!(Number.isInteger(maxNew) && maxNew >= 0))
    throw new GenerationError(`generate: maxNewTokens = ${maxNew} must be a non-negative integer`);
  if (options.stopStrings?.length && !options.tokenizer)
    throw new GenerationError("generate: stopStrings need a tokenizer");
  if (options.seeds && options.seeds.length !== B)
    throw new GenerationError(`generate: ${options.seeds.length} seeds for ${B} prompts`);
  const stopIds = stopIdsFor(model, options);
  const pad = options.padTokenId ?? options.tokenizer?.padTokenId ?? 0;
  const runc = options.sampler === "runc";
  if (options.sampler !== undefined && options.sampler !== "default" && !runc)
    throw new GenerationError(`generate: sampler = ${String(options.sampler)} must be "default" or "runc"`);
  if (runc && (options.topK || options.minP || options.greedy))
    throw new GenerationError('generate: sampler "runc" takes only temperature and topP (not topK, minP, greedy)');
  const rngs = Array.from({ length: B }, (_, b) =>
    options.seeds ? new Rng(options.seeds[b]) : new Rng(options.seed ?? 0, b),
  );
  const runcRngs = runc
    ? Array.from({ length: B }, (_, b) => {
        const seed = options.seeds ? options.seeds[b] : options.seed;
        // A zero xorshift state only ever yields zero; run.c replaces a seed ≤ 0 with the time.
        if (!(Number.isSafeInteger(seed) && (seed as number) > 0))
          throw new GenerationError(`generate: sampler "runc" needs a positive integer seed, got ${String(seed)}`);
        return new RunCRng(seed as number);
      })
    : [];
  const rows = prompts.map(
    (p, b) =>
      new RowDecoder(p, {
        sampling: options,
        rng: rngs[b],
        ...(runc ? { runcRng: runcRngs[b] } : {}),
        maxNewTokens: maxNew,
        stopIds,
        stopStrings: options.stopStrings,
        tokenizer: options.tokenizer,
        topLogprobs: options.topLogprobs,
      }),
  );
  const L = Math.max(...prompts.map((p) => p.length));
  const ids = new Int32Array(B * L).fill(pad);
  const mask = new Uint8Array(B * L);
  prompts.forEach((p, b) => {
    ids.set(p, b * L + L - p.length);
    mask.fill(1, b * L + L - p.length, (b + 1) * L);
  });
  if (maxNew > 0) {
    const cache = model.newCache(B);
    let logits = model.forward(new Tensor(ids, [B, L], "i32"), { attentionMask: mask, cache, logitsToKeep: 1 });
    for (;;) {
      const data: Float32Array = yield logits;
      const next = new Int32Array(B).fill(pad);
      const stepMask = new Uint8Array(B);
      for (const [b, row] of rows.entries()) {
        if (row.done) continue;
        const token = row.step(data.subarray(b * V, (b + 1) * V));
        options.onToken?.(b, token);
        next[b] = token;
        stepMask[b] = 1;
      }
      if (rows.every((r) => r.done)) break;
      logits = model.forward(new Tensor(next, [B, 1], "i32"), { attentionMask: stepMask, cache });
    }
    cache.dispose();
  }
  return rows.map((r) => r.finish());
}

/**
 * Generate completions for token prompts, reading each step's logits synchronously: js and wasm. On a
 * backend whose memory the host cannot read without waiting (WebGPU) it throws SyncReadError before any
 * work; `generateAsync` works on every backend.
 */
export function generate(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  options: GenerateOptions = {},
): GenerationOutput[] {
  return readSync("generate", "generateAsync", () => generationSteps(model, prompts, options));
}

/** `generate` on every backend: each step's logits are read with an async host read (WebGPU). */
export async function generateAsync(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  options: GenerateOptions = {},
): Promise<GenerationOutput[]> {
  return readAsync(() => generationSteps(model, prompts, options));
}
