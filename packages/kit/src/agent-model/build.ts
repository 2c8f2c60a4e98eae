// Builds the embedded agent model from nothing: corpus → BPE tokenizer → a small Qwen3 decoder trained
// from random weights with kiln's own engine → a Hugging Face directory. Deterministic for a seed on
// one backend (fixed corpus, fixed batch order, fixed initialisation).
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { writeFileAtomic } from "@kiln/hub-io";
import { type SftCollated, collateSft, sftLoss } from "@kiln/losses";
import { type Model, type Tokenizer, chatmlTemplate, createModel } from "@kiln/models";
import { ProgressBar, mulberry32 } from "@kiln/rollout";
import {
  AdamW,
  backward,
  clipGradNorm,
  cosineSchedule,
  getBackend,
  nativeBackendInfo,
  tidy,
  warmupSteps,
} from "@kiln/tensor";
import { writeMergedModel } from "../artifacts.js";
import { yieldToEventLoop } from "../trainer/event-loop.js";
import { tinyQwen3Config } from "../recipes/tiny-chat.js";
import { trainBpeTokenizer } from "./bpe.js";
import {
  AGENT_MODEL_CHECKPOINT_EVERY,
  AgentModelCheckpointError,
  type BuildCheckpointState,
  type BuildSettings,
  agentModelCheckpointDir,
  checkpointMismatch,
  checkpointToResume,
  corpusDigest,
  readBuildCheckpoint,
  restoreBuildCheckpoint,
  writeBuildCheckpoint,
} from "./checkpoint.js";
import { type CorpusDocument, guessNumberCorpus } from "./corpus.js";
import { COPY_DRILL_GAME } from "./drills.js";
import { sampleStories } from "./plain-text.js";

export interface AgentModelSize {
  hiddenSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
  vocabSize: number;
}

/** The agent model's `max_position_embeddings`: the longest training row (`maxLength`) it takes. */
export const AGENT_MODEL_MAX_POSITIONS = 2048;

// A 1024-token vocabulary (512 before the clembench games): the games' long, repeated prompts take fewer
// tokens, so more of a game's state fits in a row.
export const AGENT_MODEL_SIZE: AgentModelSize = { hiddenSize: 192, layers: 6, heads: 6, kvHeads: 2, vocabSize: 1024 };

// Guess-number and stories were 1000 and 300 documents (half the corpus's tokens) while the clembench
// games got a small share; fewer of them leave the steps to the games the model failed.
export const AGENT_MODEL_GUESS_NUMBER_EPISODES = 400;
export const AGENT_MODEL_STORIES = 100;
/** Steps of the shipped build, the copy warm-up included. */
export const AGENT_MODEL_STEPS = 5500;
// Copying from the prompt forms only with enough drill tokens: copy drills alone for 1,500 steps taught
// this architecture to copy; the same drills as half the mixture's loss tokens over 4,000 steps did not,
// and a 1,500-step warm-up before the mixture keeps it (kit README, "Copying from the prompt is the wall").
export const AGENT_MODEL_COPY_WARMUP_STEPS = 1500;

export interface BuildAgentModelOptions {
  outDir: string;
  seed?: number;
  /** Optimizer steps (default AGENT_MODEL_STEPS). */
  steps?: number;
  /**
   * The first steps (of `steps`) train on copy drills alone (default 0: none; `kiln agent-model` uses
   * AGENT_MODEL_COPY_WARMUP_STEPS). Needs copy drills among `extraDocuments`.
   */
  copyWarmupSteps?: number;
  /** Packed rows of `maxLength` tokens per step (default 5). */
  batchSize?: number;
  lr?: number;
  /** Row width in tokens; a longer document keeps its end (default 768). */
  maxLength?: number;
  guessNumberEpisodes?: number;
  stories?: number;
  heldoutStories?: number;
  /** More documents (questworld windows, Wordle games) made by their own generators. */
  extraDocuments?: CorpusDocument[];
  size?: Partial<AgentModelSize>;
  /** The command the model card names as its recipe (default `kiln agent-model --seed S --steps N`). */
  recipe?: string;
  log?: (line: string) => void;
  progress?: boolean;
  /**
   * Steps between checkpoints in `agentModelCheckpointDir(outDir)` (default AGENT_MODEL_CHECKPOINT_EVERY; 0: none).
   * The checkpoint is removed when the model is written.
   */
  checkpointEvery?: number;
  /** Continue from the checkpoint an unfinished build of the same settings and corpus left (an error if none). */
  resume?: boolean;
  /**
   * Aborted (Ctrl-C): the build stops after the step in flight, checkpoints the steps done (unless checkpointEvery
   * is 0) and throws AgentModelBuildInterrupted.
   */
  signal?: AbortSignal;
  /** Called once the corpus and the model are ready, with the step training starts from (0, or the resumed one). */
  onTrainingStart?: (fromStep: number) => void;
}

export interface BuildAgentModelResult {
  dir: string;
  parameters: number;
  documents: Record<string, number>;
  trainTokens: number;
  lossFirst: number;
  lossLast: number;
  heldoutPerplexity: number;
  tokens: Record<string, GameTokenStats>;
}

export class AgentModelBuildError extends Error {
  override name = "AgentModelBuildError";
}

/** The build stopped because its `signal` was aborted, after `step` steps; `checkpoint` is what --resume continues. */
export class AgentModelBuildInterrupted extends AgentModelBuildError {
  override name = "AgentModelBuildInterrupted";
  constructor(
    readonly step: number,
    readonly checkpoint: { dir: string; step: number } | null,
  ) {
    super(
      `interrupted after step ${step}; ${checkpoint ? `the checkpoint in ${checkpoint.dir} holds step ${checkpoint.step}` : "no checkpoint was written"}`,
    );
  }
}

// One compiled template for every document (a corpus has thousands).
let template: ReturnType<typeof chatmlTemplate> | undefined;
const corpusTemplate = () => {
  template ??= chatmlTemplate();
  return template;
};

/** The text a document trains on: a rendered conversation (no generation prompt) or plain text. */
export function documentText(doc: CorpusDocument): string {
  if (doc.text !== undefined) return `${doc.text}<|endoftext|>`;
  if (!doc.messages) throw new AgentModelBuildError(`document of ${doc.game} has neither text nor messages`);
  return corpusTemplate().render(doc.messages, { tools: doc.tools });
}

export interface Row {
  ids: Int32Array;
  /** 1 where the token carries the loss. */
  mask: Uint8Array;
  /** Tokens of the document before a too-long one was cut to its end. */
  fullLength: number;
}

/**
 * `12 min in, about 40 min left` at each progress line: the time since training started, and the steps left at
 * the median pace of the last five intervals between lines, so that one slow stretch (a suspended process, a
 * laptop asleep, a busy machine) moves the estimate for a moment, not for the rest of the build.
 */
export function buildClock(start = Date.now(), now: () => number = Date.now) {
  const marks: { time: number; step: number }[] = [{ time: start, step: 0 }];
  const minutes = (ms: number) => (ms < 60_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`);
  return (stepsDone: number, stepsLeft: number): string => {
    const t = now();
    marks.push({ time: t, step: stepsDone });
    if (marks.length > 6) marks.shift();
    const elapsed = `${minutes(t - start)}`;
    if (stepsLeft <= 0) return elapsed;
    const paces = marks
      .slice(1)
      .map((m, i) => (m.time - marks[i].time) / Math.max(1, m.step - marks[i].step))
      .sort((a, b) => a - b);
    return `${elapsed} in, about ${minutes(paces[Math.floor(paces.length / 2)] * stepsLeft)} left`;
  };
}

/** Token ids of a document and which of them carry the loss. */
export function documentRow(doc: CorpusDocument, tokenizer: Tokenizer, maxLength: number): Row {
  const ids = tokenizer.encode(documentText(doc));
  const mask = new Uint8Array(ids.length);
  const messages = doc.messages;
  if (doc.lossOn === "last" && messages && messages.length > 1) {
    const head = corpusTemplate().render(messages.slice(0, -1), { addGenerationPrompt: true, tools: doc.tools });
    mask.fill(1, tokenizer.encode(head).length);
  } else if (doc.lossOn === "assistant" && messages) {
    // A reply's tokens run from the end of its generation prompt to the end of the rendering that includes it
    // (the chat template's special tokens split the text, so a prefix encodes to a prefix of the ids).
    for (let i = 0; i < messages.length; i++) {
      if (messages[i].role !== "assistant") continue;
      const from = tokenizer.encode(
        corpusTemplate().render(messages.slice(0, i), { addGenerationPrompt: true, tools: doc.tools }),
      ).length;
      const to = tokenizer.encode(corpusTemplate().render(messages.slice(0, i + 1), { tools: doc.tools })).length;
      mask.fill(1, from, to);
    }
  } else mask.fill(1);
  // Keep the end (the reply) when a document is too long.
  const start = Math.max(0, ids.length - maxLength);
  return { ids: Int32Array.from(ids.slice(start)), mask: mask.slice(start), fullLength: ids.length };
}

export interface GameTokenStats {
  documents: number;
  meanTokens: number;
  maxTokens: number;
  lossTokens: number;
  /** Documents longer than maxLength (they keep their end). */
  truncated: number;
}

/** Per game: document count, tokens before the cut, loss tokens after it, and how many were cut. */
function corpusTokenStats(docs: readonly CorpusDocument[], rows: readonly Row[], maxLength: number) {
  const acc: Record<string, { documents: number; tokens: number; maxTokens: number; loss: number; cut: number }> = {};
  docs.forEach((d, i) => {
    const a = (acc[d.game] ??= { documents: 0, tokens: 0, maxTokens: 0, loss: 0, cut: 0 });
    const full = rows[i].fullLength;
    a.documents++;
    a.tokens += full;
    a.maxTokens = Math.max(a.maxTokens, full);
    a.loss += rows[i].mask.reduce((n, m) => n + m, 0);
    if (full > maxLength) a.cut++;
  });
  const out: Record<string, GameTokenStats> = {};
  for (const [game, a] of Object.entries(acc))
    out[game] = {
      documents: a.documents,
      meanTokens: Math.round(a.tokens / a.documents),
      maxTokens: a.maxTokens,
      lossTokens: a.loss,
      truncated: a.cut,
    };
  return out;
}

/** Batch widths are rounded up to this many tokens, so a run sees a few shapes and reuses their memory. */
const WIDTH_STEP = 64;

/** Right-padded rows with every token a label (the held-out perplexity's batches), width a multiple of WIDTH_STEP. */
function paddedBatch(rows: readonly Int32Array[], padId: number): SftCollated {
  const width = Math.ceil(Math.max(...rows.map((r) => r.length)) / WIDTH_STEP) * WIDTH_STEP;
  return collateSft(
    rows.map((ids) => ({ ids, mask: new Uint8Array(ids.length).fill(1) })),
    padId,
    -100,
    width,
  );
}

/**
 * One epoch as batches of `batchRows` rows of exactly `width` tokens: documents in a seeded order,
 * packed whole into rows (a row ends when the next document does not fit), rows grouped in order.
 * Every step has the same shape, so the backend's memory pools are reused instead of growing with
 * each new length. Attention crosses the documents of a row (GPT-style packing); each document
 * begins after the previous one's end token.
 */
function epochPackedBatches(rows: readonly Row[], batchRows: number, width: number, rng: () => number): Row[][][] {
  const order = rows.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const packed: Row[][] = [];
  let current: Row[] = [];
  let used = 0;
  for (const i of order) {
    const r = rows[i];
    if (used + r.ids.length > width && current.length > 0) {
      packed.push(current);
      current = [];
      used = 0;
    }
    current.push(r);
    used += r.ids.length;
  }
  if (current.length > 0) packed.push(current);
  const batches: Row[][][] = [];
  for (let i = 0; i < packed.length; i += batchRows) batches.push(packed.slice(i, i + batchRows));
  return batches;
}

/**
 * Each step's packed rows, without end: epochs over `warmupRows` alone for the first `warmupSteps` steps,
 * then epochs over every row (the warm-up's unfinished epoch is dropped).
 */
export function* stepBatches(
  rows: readonly Row[],
  warmupRows: readonly Row[],
  warmupSteps: number,
  batchRows: number,
  width: number,
  rng: () => number,
): Generator<Row[][], never> {
  let queue: Row[][][] = [];
  for (let step = 0; ; step++) {
    if (step === warmupSteps) queue = [];
    if (queue.length === 0) queue = epochPackedBatches(step < warmupSteps ? warmupRows : rows, batchRows, width, rng);
    yield queue.shift()!;
  }
}

/** `batchRows` rows of `width` tokens, each the concatenation of its documents, with their loss masks. */
function makePackedBatch(batch: readonly Row[][], batchRows: number, width: number, padId: number): SftCollated {
  const rows = Array.from({ length: batchRows }, (_, b) => {
    const docs = batch[b] ?? [];
    const ids = new Int32Array(docs.reduce((n, d) => n + d.ids.length, 0));
    const mask = new Uint8Array(ids.length);
    let at = 0;
    for (const d of docs) {
      ids.set(d.ids, at);
      // The label at position t is token t itself (the loss shifts).
      mask.set(d.mask, at);
      at += d.ids.length;
    }
    return { ids, mask };
  });
  return collateSft(rows, padId, -100, width);
}

/** Mean next-token loss (nats per token) of `texts` under the model, in batches, without gradients. */
export function textPerplexity(model: Model, tokenizer: Tokenizer, texts: readonly string[], maxLength = 768): number {
  const pad = tokenizer.padTokenId ?? 0;
  let nll = 0;
  let count = 0;
  for (let i = 0; i < texts.length; i += 8) {
    const rows = texts.slice(i, i + 8).map((t) => Int32Array.from(tokenizer.encode(t).slice(0, maxLength)));
    tidy(() => {
      const b = paddedBatch(rows, pad);
      const logits = model.chunkedLogits(b.inputIds, { attentionMask: b.attentionMask });
      const out = sftLoss(logits, b.labels, {});
      const n = rows.reduce((a, r) => a + r.length - 1, 0);
      nll += out.loss.item() * n;
      count += n;
    });
  }
  return Math.exp(nll / count);
}

export async function buildAgentModel(options: BuildAgentModelOptions): Promise<BuildAgentModelResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const seed = options.seed ?? 0;
  const size = { ...AGENT_MODEL_SIZE, ...options.size };
  const steps = options.steps ?? AGENT_MODEL_STEPS;
  const copyWarmup = options.copyWarmupSteps ?? 0;
  if (!(Number.isInteger(copyWarmup) && copyWarmup >= 0 && copyWarmup < steps))
    throw new AgentModelBuildError(
      `the copy warm-up (${copyWarmup} steps) must be a whole number of steps below the build's ${steps}`,
    );
  const batchSize = options.batchSize ?? 5;
  const maxLength = options.maxLength ?? 768;
  if (!(Number.isInteger(maxLength) && maxLength >= 2 && maxLength <= AGENT_MODEL_MAX_POSITIONS))
    throw new AgentModelBuildError(
      `maxLength must be an integer from 2 to ${AGENT_MODEL_MAX_POSITIONS}, got ${maxLength}`,
    );
  const checkpointEvery = options.checkpointEvery ?? AGENT_MODEL_CHECKPOINT_EVERY;
  if (!(Number.isInteger(checkpointEvery) && checkpointEvery >= 0))
    throw new AgentModelBuildError(`checkpointEvery must be a whole number of steps (0: none), got ${checkpointEvery}`);
  // Checked before the corpus is made (a minute or two).
  const checkpointDir = agentModelCheckpointDir(options.outDir);
  const found = checkpointToResume(options.outDir, options.resume === true);

  log(`[agent-model] corpus (seed ${seed})`);
  const guess = await guessNumberCorpus({
    seed,
    episodes: options.guessNumberEpisodes ?? AGENT_MODEL_GUESS_NUMBER_EPISODES,
  });
  const storyCount = options.stories ?? AGENT_MODEL_STORIES;
  const heldoutCount = options.heldoutStories ?? 64;
  const stories = await sampleStories({ count: storyCount + heldoutCount, seed });
  const heldout = stories.slice(storyCount);
  const docs: CorpusDocument[] = [
    ...guess,
    ...(options.extraDocuments ?? []),
    ...stories.slice(0, storyCount).map((text) => ({ game: "text", skill: "stories260K", text })),
  ];
  if (copyWarmup > 0 && !docs.some((d) => d.game === COPY_DRILL_GAME))
    throw new AgentModelBuildError(
      `a copy warm-up of ${copyWarmup} steps needs copy drills in the corpus (corpus.copyDrills > 0), found none`,
    );
  const counts: Record<string, number> = {};
  for (const d of docs) counts[`${d.game}/${d.skill}`] = (counts[`${d.game}/${d.skill}`] ?? 0) + 1;
  const texts = docs.map(documentText);
  log(
    `[agent-model] ${docs.length} documents, ${texts.reduce((a, t) => a + t.length, 0)} characters: ${JSON.stringify(counts)}`,
  );

  const tokenizer = trainBpeTokenizer(texts, size.vocabSize);
  const rows = docs.map((d) => documentRow(d, tokenizer, maxLength));
  const copyRows = rows.filter((_, i) => docs[i].game === COPY_DRILL_GAME);
  const trainTokens = rows.reduce((a, r) => a + r.ids.length, 0);
  log(
    `[agent-model] BPE vocabulary ${tokenizer.vocabSize}; ${trainTokens} tokens (${(trainTokens / rows.length).toFixed(0)} per document)`,
  );
  const tokenStats = corpusTokenStats(docs, rows, maxLength);
  for (const [game, st] of Object.entries(tokenStats))
    log(
      `[agent-model]   ${game}: ${st.documents} documents, ${st.meanTokens} tokens on average (max ${st.maxTokens}), ${st.lossTokens} loss tokens, ${st.truncated} cut to ${maxLength}`,
    );

  const config = tinyQwen3Config(size.vocabSize, {
    hidden_size: size.hiddenSize,
    intermediate_size: 3 * size.hiddenSize,
    num_hidden_layers: size.layers,
    num_attention_heads: size.heads,
    num_key_value_heads: size.kvHeads,
    head_dim: size.hiddenSize / size.heads,
    max_position_embeddings: AGENT_MODEL_MAX_POSITIONS,
    bos_token_id: null,
    eos_token_id: tokenizer.eosTokenId,
    pad_token_id: tokenizer.padTokenId,
  });
  const model = createModel(config, { seed, std: 0.02 });
  const params = model.requireGrad();
  const parameters = params.reduce((a, p) => a + p.size, 0);
  log(
    `[agent-model] Qwen3 d=${size.hiddenSize} × ${size.layers} layers, ${parameters} parameters; ${steps} steps of ${batchSize} packed rows × ${maxLength} tokens on ${getBackend()}${copyWarmup > 0 ? `; the first ${copyWarmup} on the ${copyRows.length} copy drills alone` : ""}`,
  );
  const lr = options.lr ?? 3e-3;
  const optimizer = new AdamW(params, { lr, weightDecay: 0.01, betas: [0.9, 0.95] });
  // Everything that decides the training besides the corpus: a checkpoint continues only a build that shares it.
  const settings: BuildSettings = {
    seed,
    steps,
    copyWarmupSteps: copyWarmup,
    batchSize,
    maxLength,
    lr,
    backend: getBackend(),
    size: { ...size },
  };
  const corpusSha256 = corpusDigest(rows);
  const native = getBackend() === "native" ? nativeBackendInfo() : null;
  const blas = native ? `${native.library} core ${native.core ?? "unknown"}` : null;
  let startStep = 0;
  if (found) {
    const why = checkpointMismatch(found, settings, corpusSha256);
    if (why) throw new AgentModelCheckpointError(`cannot resume from ${checkpointDir}: ${why}`);
    if ((found.blas ?? null) !== blas)
      log(
        `[agent-model] note: the checkpoint's steps ran on ${found.blas ?? "no BLAS"}, these run on ${blas ?? "no BLAS"}: the model will equal no uninterrupted build bit for bit`,
      );
    await restoreBuildCheckpoint(checkpointDir, model, optimizer);
    startStep = found.step;
    log(`[agent-model] resumed from ${checkpointDir} at step ${startStep}/${steps}`);
  }
  const schedule = cosineSchedule(warmupSteps(steps, 0.03), steps);
  const rng = mulberry32(seed + 1);
  const pad = tokenizer.padTokenId ?? 0;
  const bar = new ProgressBar({
    total: steps,
    label: "agent-model",
    stream: options.progress === false ? null : undefined,
  });
  const batches = stepBatches(rows, copyRows, copyWarmup, batchSize, maxLength, rng);
  let lossFirst = found?.lossFirst ?? Number.NaN;
  let lossLast = found?.lossLast ?? Number.NaN;
  let ema = found?.lossEma ?? Number.NaN;
  // The batch order is a seeded stream: replaying the steps done puts it where the checkpoint left it.
  for (let step = 0; step < startStep; step++) batches.next();
  bar.tick(startStep);
  const checkpointState = (done: number): BuildCheckpointState => ({
    format: "kiln-agent-model-checkpoint/1",
    step: done,
    settings,
    corpusSha256,
    blas,
    lossFirst,
    lossLast,
    lossEma: ema,
  });
  options.onTrainingStart?.(startStep);
  const clock = buildClock();
  for (let step = startStep; step < steps; step++) {
    // A step is a synchronous second or so: the event loop's turn between steps is what lets a Ctrl-C in.
    await yieldToEventLoop();
    if (options.signal?.aborted) {
      if (checkpointEvery > 0 && step > startStep)
        await writeBuildCheckpoint(checkpointDir, model, optimizer, checkpointState(step));
      bar.finish();
      const kept = readBuildCheckpoint(checkpointDir);
      throw new AgentModelBuildInterrupted(step, kept ? { dir: checkpointDir, step: kept.step } : null);
    }
    const docs = batches.next().value as Row[][];
    optimizer.lr = lr * schedule(step);
    const loss = tidy(() => {
      const b = makePackedBatch(docs, batchSize, maxLength, pad);
      const logits = model.chunkedLogits(b.inputIds, { attentionMask: b.attentionMask });
      const out = sftLoss(logits, b.labels, {});
      backward(out.loss);
      clipGradNorm(params, 1);
      optimizer.step();
      optimizer.zeroGrad();
      return out.loss.item();
    });
    if (!Number.isFinite(loss)) throw new AgentModelBuildError(`step ${step}: loss is ${loss}`);
    if (step === 0) lossFirst = loss;
    lossLast = loss;
    ema = Number.isNaN(ema) ? loss : 0.98 * ema + 0.02 * loss;
    bar.show({ loss: ema.toFixed(3) });
    bar.tick(1);
    if ((step + 1) % 50 === 0 || step + 1 === steps)
      log(
        `[agent-model] step ${step + 1}/${steps} loss ${ema.toFixed(4)} (${clock(step + 1 - startStep, steps - step - 1)})`,
      );
    const done = step + 1;
    if (checkpointEvery > 0 && done % checkpointEvery === 0 && done < steps)
      await writeBuildCheckpoint(checkpointDir, model, optimizer, checkpointState(done));
  }
  bar.finish();
  model.requireGrad(false);
  const heldoutPerplexity = textPerplexity(model, tokenizer, heldout, maxLength);
  log(`[agent-model] held-out story perplexity ${heldoutPerplexity.toFixed(3)}`);

  // Written beside the target and renamed into place: a half-written model directory never exists.
  const tmp = `${options.outDir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(dirname(options.outDir), { recursive: true });
  await writeMergedModel(tmp, model, {
    tokenizer,
    template: chatmlTemplate(),
    dtype: "f32",
    baseModel: "none (trained from random weights by kiln)",
    title: "kiln agent-tiny: the embedded agent model",
    tags: ["agent", "from-scratch"],
    body: [
      `A ${parameters}-parameter Qwen3-architecture decoder trained from random weights by kiln (\`${options.recipe ?? `kiln agent-model --seed ${seed} --steps ${steps}`}\`)`,
      "on transcripts of scripted players of mixed skill and on stories sampled from stories260K. It plays its games *badly*",
      "on purpose: the recipes have room to improve it (and to break it).",
      "",
      `Documents: ${JSON.stringify(counts)}; ${trainTokens} tokens; loss ${lossFirst.toFixed(3)} → ${lossLast.toFixed(3)};`,
      `held-out story perplexity ${heldoutPerplexity.toFixed(3)} (heldout.txt).`,
    ].join("\n"),
  });
  await writeFileAtomic(join(tmp, "heldout.txt"), `${heldout.join("\n")}\n`);
  rmSync(options.outDir, { recursive: true, force: true });
  renameSync(tmp, options.outDir);
  if (existsSync(checkpointDir)) rmSync(checkpointDir, { recursive: true, force: true });
  return {
    dir: options.outDir,
    parameters,
    documents: counts,
    trainTokens,
    lossFirst,
    lossLast,
    heldoutPerplexity,
    tokens: tokenStats,
  };
}
