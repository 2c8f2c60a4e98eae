// One sequence's side of decoding: turn each step's raw logits row into the next token (penalty,
// sampler, its own RNG stream), record the log-probs, and decide when the row stops (stop token,
// stop string, length). Shared by the static `generate` loop and the batching scheduler, so both
// sample a row exactly the same way.
import type { Rng } from "@kiln/tensor";
import { type RunCRng, sampleRunC } from "./runc-sampler.js";
import {
  type SamplingParams,
  applyRepetitionPenalty,
  logSoftmaxRow,
  sampleFromLogits,
  topEntries,
} from "./sampling.js";
import type { Tokenizer } from "./tokenizer.js";

export interface TokenAlternative {
  tokenId: number;
  logprob: number;
}

export interface GenerationOutput {
  promptIds: number[];
  /** Completion tokens, the stop token included when one ended the row. */
  tokenIds: number[];
  /**
   * The completion's text as it continues the prompt (a SentencePiece word start keeps its space, so
   * `decode(promptIds) + text` reads as the whole sequence), without the stop token and cut before a stop
   * string ("" without a tokenizer).
   */
  text: string;
  /** Raw log-prob of each completion token. */
  logprobs: number[];
  topLogprobs?: TokenAlternative[][];
  finishReason: "stop" | "length";
  /** The stop token id or stop string that ended the row. */
  stoppedBy?: number | string;
}

export interface RowDecoderOptions {
  sampling: SamplingParams;
  /** The row's RNG: kiln's sampler draws one uniform per token from it… */
  rng: Rng;
  /** …unless run.c's sampler is asked for, with its own xorshift state. */
  runcRng?: RunCRng;
  maxNewTokens: number;
  stopIds: ReadonlySet<number>;
  stopStrings?: readonly string[];
  tokenizer?: Tokenizer;
  topLogprobs?: number;
}

export class RowDecoder {
  readonly out: GenerationOutput;
  done: boolean;

  constructor(
    promptIds: readonly number[],
    private readonly options: RowDecoderOptions,
  ) {
    this.out = { promptIds: [...promptIds], tokenIds: [], text: "", logprobs: [], finishReason: "length" };
    if (options.topLogprobs) this.out.topLogprobs = [];
    this.done = options.maxNewTokens === 0;
  }

  /** Picks the next token from this step's raw logits (not modified) and records it; sets `done` when the row ends. */
  step(raw: Float32Array): number {
    const { options: o, out } = this;
    const processed = Float32Array.from(raw);
    const penalty = o.sampling.repetitionPenalty;
    if (penalty && penalty !== 1) applyRepetitionPenalty(processed, [...out.promptIds, ...out.tokenIds], penalty);
    const token = o.runcRng
      ? sampleRunC(processed, o.sampling.temperature ?? 1, o.sampling.topP ?? 1, o.runcRng)
      : sampleFromLogits(processed, o.sampling, o.rng.uniform(1)[0]);
    const lp = logSoftmaxRow(raw);
    out.tokenIds.push(token);
    out.logprobs.push(lp[token]);
    if (o.topLogprobs)
      out.topLogprobs?.push(topEntries(lp, o.topLogprobs).map(([tokenId, logprob]) => ({ tokenId, logprob })));
    if (o.stopIds.has(token)) {
      this.done = true;
      out.finishReason = "stop";
      out.stoppedBy = token;
    } else if (o.stopStrings?.length && o.tokenizer) {
      const text = o.tokenizer.decodeContinuation(out.promptIds, out.tokenIds);
      const hit = firstStop(text, o.stopStrings);
      if (hit) {
        this.done = true;
        out.finishReason = "stop";
        out.stoppedBy = hit.stop;
        out.text = text.slice(0, hit.index);
      }
    }
    if (out.tokenIds.length >= o.maxNewTokens) this.done = true;
    return token;
  }

  /** The output with its text decoded (once the row is done). */
  finish(): GenerationOutput {
    const { out } = this;
    const tokenizer = this.options.tokenizer;
    if (tokenizer && typeof out.stoppedBy !== "string") {
      const body = out.finishReason === "stop" ? out.tokenIds.slice(0, -1) : out.tokenIds;
      out.text = tokenizer.decodeContinuation(out.promptIds, body);
    }
    return out;
  }
}

function firstStop(text: string, stops: readonly string[]): { index: number; stop: string } | null {
  let best: { index: number; stop: string } | null = null;
  for (const s of stops) {
    if (s === "") continue;
    const i = text.indexOf(s);
    if (i >= 0 && (best === null || i < best.index)) best = { index: i, stop: s };
  }
  return best;
}
