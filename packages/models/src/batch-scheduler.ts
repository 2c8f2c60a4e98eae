// Continuous batching for in-process generation (docs/ARCHITECTURE.md §Continuous batching).
// Concurrent callers (episodes of runEpisodes, clients of kiln serve) submit generation and scoring
// requests; one loop runs them together. Between steps, finished sequences leave and queued ones
// join (FIFO, while they fit the sequence cap and the KV byte budget). Each step is a few prefill
// forwards at most — newcomers' prompts in chunks, so running decoders wait a bounded time, never
// for a whole long prompt — and one decode forward with one row per decoding sequence. Every sequence keeps its own
// KV cache (SequenceKV) and its own RNG stream.
//
// Determinism: a sequence's tokens and log-probs do not depend on which other sequences share its
// steps, so the same seed gives the same trajectories at any concurrency and arrival timing. Three
// rules make that hold on kernels that are not batch-invariant themselves (a GEMM may pick another
// code path, and another summation order, for another number of rows):
//   1. fixed widths: a prefill forward always has `prefillChunk` rows and a decode forward `maxNumSeqs`
//      rows, padded, so every matrix product has the same shape whatever the load — or, for a decode
//      forward of few sequences, a narrower power-of-two width once DecodeWidths has checked that the
//      model's linears give every row the same bits at that width on this backend;
//   2. each sequence attends to its own cache alone, with shapes that depend on its own length;
//   3. prefill chunk boundaries are multiples of `prefillChunk` in the sequence's own positions, and
//      the last prompt token always goes through a decode forward (which makes the first logits).
// Rules 1 and 3 make a full prompt chunk's KV rows a function of the tokens up to its end, which is what
// lets the prefix cache (prefix-cache.ts) hand a later prompt those rows instead of recomputing them: a hit
// gives the same bits as a miss, so what the cache holds never shows in a trajectory.
import { GenerationAbortedError } from "@kiln/rollout";
import { Rng, Tensor, getBackend, noGrad, parameterUpdateCount, tidy } from "@kiln/tensor";
import type { CausalLM } from "./causal-lm.js";
import { GenerationError } from "./errors.js";
import { DecodeWidths } from "./decode-widths.js";
import { type GenerationOutput, stopIdsFor } from "./generate.js";
import type { RaggedSegment } from "./layer-context.js";
import { type PrefixChunk, PrefixCache } from "./prefix-cache.js";
import { RowDecoder } from "./row-decoder.js";
import type { ScoreItem, TopLogprobs } from "./score.js";
import { type SamplingParams, checkSamplingParams, logSoftmaxRow, topEntries } from "./sampling.js";
import { SequenceKV, kvBytesPerPosition } from "./sequence-kv.js";
import type { Tokenizer } from "./tokenizer.js";

export interface BatchSchedulerOptions {
  /** Sequences in flight at once, and the rows of every decode forward. Default 16. */
  maxNumSeqs?: number;
  /** Prompt tokens per prefill forward (its rows), and the chunk length prompts are cut into. Default 128. */
  prefillChunk?: number;
  /** Prefill forwards a step may run before its decode forward (how long decoders may wait for newcomers). Default 4. */
  maxPrefillForwards?: number;
  /** Bytes of KV cache the sequences in flight may reserve (each reserves prompt + max new tokens). Default 1 GiB. */
  kvBudgetBytes?: number;
  /**
   * Decode forwards of few sequences run at a narrower power-of-two width where the backend is checked to give
   * the same bits per row (DecodeWidths); `false` always pads to `maxNumSeqs`. Default true.
   */
  narrowDecode?: boolean;
  /**
   * Bytes the prefix cache may hold: KV rows of full prompt chunks that later prompts starting with the same
   * tokens copy instead of prefilling (an episode's next turn). Least recently used chunks go first; 0 turns
   * it off. Default 256 MiB.
   */
  prefixCacheBytes?: number;
}

export interface ScheduledGenerateOptions extends SamplingParams {
  /** Default 64. */
  maxNewTokens?: number;
  /** The sequence draws from Rng(seed, 0), as row 0 of `generate` does. Default 0. */
  seed?: number;
  stopTokenIds?: number[];
  stopStrings?: string[];
  topLogprobs?: number;
  tokenizer?: Tokenizer;
  /** Called with each new token; an exception it throws ends this sequence with that error. */
  onToken?: (tokenId: number) => void;
  /** Aborting ends the sequence (between steps) with GenerationAbortedError. */
  signal?: AbortSignal;
  /** Polled between steps like `signal` (a flag another thread sets, as kiln serve's worker has). */
  cancelled?: () => boolean;
}

export interface ScheduledScore {
  /** log p of each completion token. */
  logprobs: number[];
  /** Per completion position the `topLogprobs` most likely tokens, when asked. */
  top?: TopLogprobs[];
}

/** What the scheduler holds and has done (LocalPolicy.stats, kiln serve's worker). */
export interface SchedulerStats {
  maxNumSeqs: number;
  prefillChunk: number;
  kvBudgetBytes: number;
  /** Bytes reserved by the sequences in flight (their worst case). */
  kvReservedBytes: number;
  /** Bytes their caches hold now (≤ reserved). */
  kvAllocatedBytes: number;
  peakKvReservedBytes: number;
  running: number;
  waiting: number;
  peakRunning: number;
  /** Forwards run, and the real (not padding) rows they carried. */
  decodeSteps: number;
  decodeRows: number;
  /** Decode forwards per width (rows, padding included). */
  decodeWidths: Record<number, number>;
  prefillSteps: number;
  prefillRows: number;
  completed: number;
  /** The prefix cache's cap and the bytes it holds (outside `kvBudgetBytes`). */
  prefixCacheBytes: number;
  prefixCachedBytes: number;
  /** Sequences that started from cached rows, and the prompt positions copied instead of prefilled. */
  prefixHits: number;
  prefixReusedRows: number;
  /** Chunks stored, dropped for room, and whole-cache drops because the weights changed. */
  prefixInserts: number;
  prefixEvictions: number;
  prefixClears: number;
}

interface Sequence {
  tokens: number[];
  /** Tokens [0, prefillEnd) go through prefill forwards; generation feeds the rest one per decode forward. */
  prefillEnd: number;
  /** Positions reserved in the budget. */
  reservation: number;
  kv: SequenceKV | null;
  /** The cached chunk ending at `prefixEnd`, whose chain holds this sequence's positions [0, prefixEnd). */
  prefixChunk: PrefixChunk | null;
  prefixEnd: number;
  /** Prompt positions copied from the prefix cache. */
  reusedRows?: number;
  signal?: AbortSignal;
  cancelled?: () => boolean;
  fail: (err: unknown) => void;
  generate?: {
    decoder: RowDecoder;
    onToken?: (tokenId: number) => void;
    resolve: (out: GenerationOutput) => void;
  };
  score?: {
    promptLength: number;
    topLogprobs?: number;
    result: ScheduledScore;
    resolve: (r: ScheduledScore) => void;
  };
}

/** One sequence's prompt chunk in a prefill forward: its positions [start, start + length) at rows [row, row + length). */
interface PrefillPiece {
  seq: Sequence;
  start: number;
  length: number;
  row: number;
}

const objectIds = new WeakMap<object, number>();
let nextObjectId = 0;
function objectId(o: object): number {
  let id = objectIds.get(o);
  if (id === undefined) {
    id = nextObjectId++;
    objectIds.set(o, id);
  }
  return id;
}

const yieldToEventLoop: () => Promise<void> =
  typeof setImmediate === "function"
    ? () => new Promise((resolve) => setImmediate(resolve))
    : () => new Promise((resolve) => setTimeout(resolve, 0));

export class BatchScheduler {
  readonly maxNumSeqs: number;
  readonly prefillChunk: number;
  readonly maxPrefillForwards: number;
  readonly kvBudgetBytes: number;
  private readonly bytesPerPosition: number;
  private readonly waiting: Sequence[] = [];
  private readonly running: Sequence[] = [];
  private reservedBytes = 0;
  private loop: Promise<void> | null = null;
  private readonly decodeWidths: DecodeWidths;
  private readonly decodeWidthCounts: Record<number, number> = {};
  private readonly prefixCache: PrefixCache;
  /** What the cached rows were computed with (weights, adapters, backend); when it changes the cache is dropped. */
  private prefixSignature = "";
  private counters = {
    prefixHits: 0,
    prefixReusedRows: 0,
    peakKvReservedBytes: 0,
    peakRunning: 0,
    decodeSteps: 0,
    decodeRows: 0,
    prefillSteps: 0,
    prefillRows: 0,
    completed: 0,
  };

  constructor(
    readonly model: CausalLM,
    options: BatchSchedulerOptions = {},
  ) {
    const positiveInt = (name: string, v: number) => {
      if (!(Number.isInteger(v) && v >= 1))
        throw new GenerationError(`BatchScheduler: ${name} = ${v} must be a positive integer`);
      return v;
    };
    this.maxNumSeqs = positiveInt("maxNumSeqs", options.maxNumSeqs ?? 16);
    this.prefillChunk = positiveInt("prefillChunk", options.prefillChunk ?? 128);
    this.maxPrefillForwards = positiveInt("maxPrefillForwards", options.maxPrefillForwards ?? 4);
    this.kvBudgetBytes = options.kvBudgetBytes ?? 2 ** 30;
    if (!(this.kvBudgetBytes > 0))
      throw new GenerationError(`BatchScheduler: kvBudgetBytes = ${this.kvBudgetBytes} must be positive`);
    this.prefixCache = new PrefixCache(options.prefixCacheBytes ?? 256 * 2 ** 20, this.prefillChunk);
    if (!model.supportsRaggedBatches)
      throw new GenerationError(
        `BatchScheduler: batched steps need softmax-attention layers only; this model has ${[...new Set(model.config.layerTypes)].join(", ")}`,
      );
    this.bytesPerPosition = kvBytesPerPosition(model.config);
    this.decodeWidths = new DecodeWidths(
      () => model.namedLinears().map(([, linear]) => linear),
      this.maxNumSeqs,
      options.narrowDecode ?? true,
    );
  }

  /** Generates a completion of `prompt` in the shared batch; resolves when its sequence ends. */
  generate(prompt: readonly number[], options: ScheduledGenerateOptions = {}): Promise<GenerationOutput> {
    return new Promise((resolve, reject) => {
      checkSamplingParams(options);
      this.checkTokens("generate", prompt);
      const maxNew = options.maxNewTokens ?? 64;
      if (!(Number.isInteger(maxNew) && maxNew >= 0))
        throw new GenerationError(`generate: maxNewTokens = ${maxNew} must be a non-negative integer`);
      if (options.stopStrings?.length && !options.tokenizer)
        throw new GenerationError("generate: stopStrings need a tokenizer");
      const decoder = new RowDecoder(prompt, {
        sampling: options,
        rng: new Rng(options.seed ?? 0, 0),
        maxNewTokens: maxNew,
        stopIds: stopIdsFor(this.model, options),
        stopStrings: options.stopStrings,
        tokenizer: options.tokenizer,
        topLogprobs: options.topLogprobs,
      });
      if (decoder.done) {
        resolve(decoder.finish());
        return;
      }
      this.enqueue({
        tokens: [...prompt],
        prefillEnd: prompt.length - 1,
        // The prompt and every generated token but the last are fed through the model.
        reservation: prompt.length + maxNew - 1,
        kv: null,
        prefixChunk: null,
        prefixEnd: 0,
        signal: options.signal,
        cancelled: options.cancelled,
        fail: reject,
        generate: { decoder, onToken: options.onToken, resolve },
      });
    });
  }

  /** log p of `item.completionIds` after `item.promptIds` (teacher scoring), batched with everything else. */
  score(
    item: ScoreItem,
    options: { topLogprobs?: number; signal?: AbortSignal; cancelled?: () => boolean } = {},
  ): Promise<ScheduledScore> {
    return new Promise((resolve, reject) => {
      this.checkTokens("score", item.promptIds);
      this.checkTokens("score", item.completionIds, true);
      const k = options.topLogprobs;
      const V = this.model.config.vocabSize;
      if (k !== undefined && !(Number.isInteger(k) && k >= 1 && k <= V))
        throw new GenerationError(`score: topLogprobs must be an integer in [1, ${V}], got ${k}`);
      const result: ScheduledScore = { logprobs: [], ...(k !== undefined ? { top: [] } : {}) };
      if (item.completionIds.length === 0) {
        resolve(result);
        return;
      }
      const tokens = [...item.promptIds, ...item.completionIds];
      this.enqueue({
        tokens,
        // The last token predicts nothing.
        prefillEnd: tokens.length - 1,
        reservation: tokens.length - 1,
        kv: null,
        prefixChunk: null,
        prefixEnd: 0,
        signal: options.signal,
        cancelled: options.cancelled,
        fail: reject,
        score: { promptLength: item.promptIds.length, topLogprobs: k, result, resolve },
      });
    });
  }

  stats(): SchedulerStats {
    let allocated = 0;
    for (const s of this.running) allocated += s.kv?.allocatedBytes ?? 0;
    return {
      maxNumSeqs: this.maxNumSeqs,
      prefillChunk: this.prefillChunk,
      kvBudgetBytes: this.kvBudgetBytes,
      kvReservedBytes: this.reservedBytes,
      kvAllocatedBytes: allocated,
      running: this.running.length,
      waiting: this.waiting.length,
      ...this.counters,
      decodeWidths: { ...this.decodeWidthCounts },
      prefixCacheBytes: this.prefixCache.capacityBytes,
      prefixCachedBytes: this.prefixCache.heldBytes,
      prefixInserts: this.prefixCache.counters.inserts,
      prefixEvictions: this.prefixCache.counters.evictions,
      prefixClears: this.prefixCache.counters.clears,
    };
  }

  /**
   * Drops the prefix cache. The scheduler drops it by itself when an optimizer steps or the model's weight
   * tensors, enabled adapters or backend change; code that rewrites weights in place by other means calls this.
   */
  clearPrefixCache(): void {
    this.prefixCache.clear();
  }

  /** Resolves once nothing is queued or running. */
  async idle(): Promise<void> {
    while (this.loop) await this.loop;
  }

  private checkTokens(op: string, ids: readonly number[], allowEmpty = false): void {
    if (ids.length === 0 && !allowEmpty) throw new GenerationError(`${op}: the prompt is empty`);
    const V = this.model.config.vocabSize;
    for (const id of ids)
      if (!(Number.isInteger(id) && id >= 0 && id < V))
        throw new GenerationError(`${op}: token ${id} is outside [0, ${V})`);
  }

  private enqueue(seq: Sequence): void {
    const bytes = seq.reservation * this.bytesPerPosition;
    if (bytes > this.kvBudgetBytes)
      throw new GenerationError(
        `a sequence of ${seq.reservation} positions needs ${bytes} bytes of KV cache; the budget is ${this.kvBudgetBytes}`,
      );
    if (seq.signal?.aborted || seq.cancelled?.()) throw new GenerationAbortedError("aborted before it started");
    this.waiting.push(seq);
    this.kick();
  }

  private kick(): void {
    if (this.loop) return;
    this.loop = this.run().finally(() => {
      this.loop = null;
      if (this.waiting.length > 0 || this.running.length > 0) this.kick();
    });
  }

  private async run(): Promise<void> {
    // Callers resumed in the same turn of the event loop (episodes whose replies just came back) join the first step.
    await yieldToEventLoop();
    while (this.waiting.length > 0 || this.running.length > 0) {
      await this.step();
      await yieldToEventLoop();
    }
  }

  private async step(): Promise<void> {
    this.dropAborted();
    // The cache is read and written only where prompts are prefilled; steps of decoders alone skip the check.
    if (this.waiting.length > 0 || this.running.some((s) => (s.kv?.length ?? 0) < s.prefillEnd))
      this.checkPrefixSignature();
    this.admit();
    // Decoders are those whose whole context but the last token is cached when the step starts.
    const decoders = this.running.filter((s) => s.generate && s.kv && s.kv.length === s.tokens.length - 1);
    const forwards: { plan: PrefillPiece[]; logits: Tensor | null }[] = [];
    let decodeLogits: Tensor | null = null;
    const involved = new Set(decoders);
    const stored: PrefixChunk[] = [];
    try {
      const width = decoders.length > 0 ? await this.decodeWidths.widthFor(decoders.length) : 0;
      for (const s of decoders) s.kv?.reserve(1);
      // Up to `maxPrefillForwards` prefill forwards, then the decode forward; all are queued before any
      // result is read (on a device backend, one submission per step).
      for (let f = 0; f < this.maxPrefillForwards; f++) {
        const plan = this.planPrefill();
        if (plan.length === 0) break;
        for (const p of plan) involved.add(p.seq);
        forwards.push({ plan, logits: this.prefillForward(plan) });
        for (const p of plan) p.seq.kv?.advance(p.length);
        for (const p of plan) this.storePrefix(p, stored);
      }
      if (decoders.length > 0) decodeLogits = this.decodeForward(decoders, width);
      for (const { plan, logits } of forwards)
        this.afterPrefill(plan, logits ? await logits.toFloat32ArrayAsync() : null);
      if (decodeLogits) this.afterDecode(decoders, await decodeLogits.toFloat32ArrayAsync());
    } catch (err) {
      // Rows of a failed step are not trusted.
      for (const chunk of stored) this.prefixCache.remove(chunk);
      for (const s of this.running) if (s.prefixChunk && stored.includes(s.prefixChunk)) involved.add(s);
      for (const s of involved) this.finish(s, err);
    } finally {
      for (const { logits } of forwards) logits?.dispose();
      decodeLogits?.dispose();
    }
  }

  private dropAborted(): void {
    for (const list of [this.waiting, this.running])
      for (const s of [...list])
        if (s.signal?.aborted || s.cancelled?.())
          this.finish(s, new GenerationAbortedError("aborted while generating"));
  }

  /** FIFO admission while the head fits the sequence cap and the byte budget (no overtaking: nothing starves). */
  private admit(): void {
    while (this.waiting.length > 0 && this.running.length < this.maxNumSeqs) {
      const head = this.waiting[0];
      const bytes = head.reservation * this.bytesPerPosition;
      if (this.reservedBytes + bytes > this.kvBudgetBytes) break;
      this.waiting.shift();
      this.reservedBytes += bytes;
      head.kv = new SequenceKV(this.model.config, head.reservation);
      this.running.push(head);
      this.reusePrefix(head);
    }
    this.counters.peakRunning = Math.max(this.counters.peakRunning, this.running.length);
    this.counters.peakKvReservedBytes = Math.max(this.counters.peakKvReservedBytes, this.reservedBytes);
  }

  /**
   * Copies the cached full chunks that continue the sequence's cached prefix into its cache (at admission, and
   * before each prefill forward: a chunk another sequence has just computed is picked up on the way).
   */
  private reusePrefix(seq: Sequence): void {
    const kv = seq.kv as SequenceKV;
    const C = this.prefillChunk;
    if (this.prefixCache.capacityBytes === 0 || kv.length !== seq.prefixEnd) return;
    // A scoring request needs prefill logits from position promptLength - 1 on: chunks before it only.
    const reusableEnd = seq.score ? Math.min(seq.prefillEnd, seq.score.promptLength - 1) : seq.prefillEnd;
    const before = seq.prefixEnd;
    // Chunk by chunk, as prefill would grow it: the buffers' capacities stay those of a miss.
    while (seq.prefixEnd + C <= reusableEnd) {
      if (seq.prefixEnd > 0 && !seq.prefixChunk) break;
      const chunk = this.prefixCache.next(seq.prefixChunk, seq.tokens, seq.prefixEnd);
      if (!chunk) break;
      kv.append(chunk.rows);
      seq.prefixChunk = chunk;
      seq.prefixEnd += C;
    }
    if (seq.prefixEnd === before) return;
    if (!seq.reusedRows) this.counters.prefixHits++;
    seq.reusedRows = (seq.reusedRows ?? 0) + seq.prefixEnd - before;
    this.counters.prefixReusedRows += seq.prefixEnd - before;
  }

  /** Stores a full prompt chunk a prefill forward just wrote, when its prefix is cached (never partial chunks). */
  private storePrefix(piece: PrefillPiece, stored: PrefixChunk[]): void {
    const { seq, start, length } = piece;
    if (this.prefixCache.capacityBytes === 0 || length !== this.prefillChunk || seq.prefixEnd !== start) return;
    if (start > 0 && !seq.prefixChunk) return;
    const result = this.prefixCache.insert(seq.prefixChunk, seq.tokens, start, seq.kv as SequenceKV);
    if (!result) return;
    if (result.created) stored.push(result.chunk);
    seq.prefixChunk = result.chunk;
    seq.prefixEnd = start + length;
  }

  /** Drops the prefix cache when what its rows were computed with may have changed. */
  private checkPrefixSignature(): void {
    if (this.prefixCache.capacityBytes === 0) return;
    let s = `${getBackend()}|${parameterUpdateCount()}`;
    for (const [, t] of this.model.namedParameters()) s += `|${objectId(t)}${t.dtype}`;
    for (const [, l] of this.model.namedLinears())
      for (const a of l.adapters) {
        if (!a.enabled) continue;
        s += `+${objectId(a)}`;
        // LoRA layers (duck-typed: @kiln/lora depends on this package): their factors and scale.
        const lora = a as unknown as { A?: object; B?: object; effectiveScaling?: number };
        if (lora.A) s += `A${objectId(lora.A)}`;
        if (lora.B) s += `B${objectId(lora.B)}`;
        if (lora.effectiveScaling !== undefined) s += `s${lora.effectiveScaling}`;
      }
    if (s !== this.prefixSignature) {
      this.prefixCache.clear();
      this.prefixSignature = s;
    }
  }

  private planPrefill(): PrefillPiece[] {
    const C = this.prefillChunk;
    const plan: PrefillPiece[] = [];
    let used = 0;
    for (const seq of this.running) {
      this.reusePrefix(seq);
      const done = seq.kv?.length ?? 0;
      if (done >= seq.prefillEnd) continue;
      // Chunk boundaries at multiples of C in the sequence's own positions (rule 3 above).
      const end = Math.min(seq.prefillEnd, (Math.floor(done / C) + 1) * C);
      if (used + end - done > C) continue;
      plan.push({ seq, start: done, length: end - done, row: used });
      used += end - done;
    }
    return plan;
  }

  private prefillForward(plan: PrefillPiece[]): Tensor | null {
    const T = this.prefillChunk;
    const ids = new Int32Array(T);
    const positions = new Int32Array(T);
    const segments: RaggedSegment[] = [];
    let needsHead = false;
    for (const p of plan) {
      const kv = p.seq.kv as SequenceKV;
      kv.reserve(p.length);
      ids.set(p.seq.tokens.slice(p.start, p.start + p.length), p.row);
      for (let i = 0; i < p.length; i++) positions[p.row + i] = p.start + i;
      segments.push({ row: 0, start: p.row, length: p.length, kv });
      if (p.seq.score && p.start + p.length > p.seq.score.promptLength - 1) needsHead = true;
    }
    this.counters.prefillSteps++;
    for (const p of plan) this.counters.prefillRows += p.length;
    // Generation and scoring never need gradients, even when the model carries trainable LoRA weights.
    return tidy(() =>
      noGrad(() => {
        const hidden = this.model.raggedHiddenStates(new Tensor(ids, [1, T], "i32"), positions, {
          layout: "packed",
          segments,
        });
        // Only scoring reads prefill logits; the head then runs over all T rows (fixed width, rule 1).
        return needsHead ? this.model.lmHead.forward(hidden) : null;
      }),
    );
  }

  private decodeForward(decoders: Sequence[], width: number): Tensor {
    const B = width;
    const ids = new Int32Array(B);
    const positions = new Int32Array(B);
    const segments: RaggedSegment[] = decoders.map((s, row) => {
      const kv = s.kv as SequenceKV;
      ids[row] = s.tokens[s.tokens.length - 1];
      positions[row] = kv.length;
      return { row, start: 0, length: 1, kv };
    });
    this.counters.decodeSteps++;
    this.counters.decodeRows += decoders.length;
    this.decodeWidthCounts[B] = (this.decodeWidthCounts[B] ?? 0) + 1;
    return tidy(() =>
      noGrad(() =>
        this.model.lmHead.forward(
          this.model.raggedHiddenStates(new Tensor(ids, [B, 1], "i32"), positions, { layout: "rows", segments }),
        ),
      ),
    );
  }

  private afterPrefill(plan: PrefillPiece[], logits: Float32Array | null): void {
    const V = this.model.config.vocabSize;
    for (const { seq, start, length, row } of plan) {
      const score = seq.score;
      if (score && logits) {
        // Position p predicts token p + 1; the completion starts at promptLength.
        for (let i = 0; i < length; i++) {
          const p = start + i;
          if (p < score.promptLength - 1) continue;
          const lp = logSoftmaxRow(logits.subarray((row + i) * V, (row + i + 1) * V));
          score.result.logprobs.push(lp[seq.tokens[p + 1]]);
          if (score.topLogprobs !== undefined) {
            const top = topEntries(lp, score.topLogprobs);
            score.result.top?.push({ tokenIds: top.map(([id]) => id), logprobs: top.map(([, v]) => v) });
          }
        }
      }
      // Its last chunk: every completion position is scored.
      if (score && start + length >= seq.prefillEnd) this.finish(seq, null);
    }
  }

  private afterDecode(decoders: Sequence[], logits: Float32Array): void {
    const V = this.model.config.vocabSize;
    for (const [row, seq] of decoders.entries()) {
      const gen = seq.generate;
      if (!gen) continue;
      seq.kv?.advance(1);
      try {
        const token = gen.decoder.step(logits.subarray(row * V, (row + 1) * V));
        seq.tokens.push(token);
        gen.onToken?.(token);
      } catch (err) {
        this.finish(seq, err);
        continue;
      }
      if (gen.decoder.done) this.finish(seq, null);
    }
  }

  /** Ends a sequence: frees its cache and reservation, then resolves (err null) or rejects it. */
  private finish(seq: Sequence, err: unknown): void {
    for (const list of [this.waiting, this.running]) {
      const i = list.indexOf(seq);
      if (i >= 0) list.splice(i, 1);
    }
    if (seq.kv) {
      seq.kv.free();
      seq.kv = null;
      this.reservedBytes -= seq.reservation * this.bytesPerPosition;
    }
    if (err !== null) {
      seq.fail(err);
      return;
    }
    this.counters.completed++;
    if (seq.generate) seq.generate.resolve(seq.generate.decoder.finish());
    else if (seq.score) seq.score.resolve(seq.score.result);
  }
}
