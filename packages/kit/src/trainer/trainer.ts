// The one training loop (docs/ARCHITECTURE.md §Trainer): SFT, DPO, OPD, self-distillation
// and user objectives all run through `train`. It only schedules; the maths is the objective's.
//
// - data: a fixed list of examples read as a stream of epochs, each a seeded permutation
//   (Rng(seed, stream = epoch + 1)); step s takes examples [s·M·A, (s+1)·M·A) of the stream as A
//   micro-batches of M (the last step of the last epoch may be short). Steps = maxSteps, else
//   ceil(epochs · n / (M · A)) (transformers' Trainer with drop_last = false).
// - normalisation: the objective is told the step's total items (tokens, pairs) and returns
//   micro-batch losses that add up to the step loss (transformers' num_items_in_batch).
// - AdamW with decoupled weight decay; lr = base · schedule(step) with warmup = ceil(steps · ratio)
//   (transformers' get_*_schedule_with_warmup), capped at ⌊(steps − 1) / 2⌋ (`stageWarmupSteps`):
//   warmup's first step has lr 0, so uncapped a 1-step stage (a --quick run) trained nothing; a long
//   stage is unchanged. Global-norm clipping, the norm logged before clipping.
// - checkpoints/<stage>/step-N/: adapter + optimizer moments + trainer_state.json (cursor, RNG
//   position, lr, history). Resume restores them and continues bit-identically.
// - a NaN/Inf loss or gradient norm stops the run before the update (NonFiniteError); the last
//   checkpoint on disk is the last good state.
import type { LoraAdapter } from "@kiln/lora";
import { type ProgressStream, formatDuration } from "@kiln/rollout";
import {
  AdamW,
  type LrSchedule,
  Rng,
  type Tensor,
  backward,
  clipGradNorm,
  constantSchedule,
  cosineSchedule,
  linearSchedule,
  rngSequencePosition,
  setRngSequencePosition,
  warmupSteps,
} from "@kiln/tensor";
import { latestCheckpoint, restoreTrainerCheckpoint, saveTrainerCheckpoint, type TrainerState } from "./checkpoints.js";
import { NonFiniteError, TrainerError } from "./errors.js";
import { yieldToEventLoop } from "./event-loop.js";

export type ScheduleKind = "cosine" | "linear" | "constant";

export interface TrainConfig {
  lr: number;
  /** AdamW decoupled weight decay (default 0, transformers' TrainingArguments). */
  weightDecay?: number;
  betas?: [number, number];
  eps?: number;
  /** Learning-rate schedule after warmup (default cosine). */
  schedule?: ScheduleKind;
  /** Warmup steps = ceil(steps · ratio), at most ⌊(steps − 1) / 2⌋ (default 0). */
  warmupRatio?: number;
  /** Global gradient-norm clip (default 1; 0 = no clipping, the norm is still logged). */
  maxGradNorm?: number;
  /** Examples per micro-batch (default 1). */
  microBatchSize?: number;
  /** Micro-batches per optimizer step (default 1). */
  gradAccum?: number;
  /** Passes over the data (default 1); ignored when maxSteps is set. */
  epochs?: number;
  /** Optimizer steps; overrides epochs (null or absent: run the epochs). */
  maxSteps?: number | null;
  /** Seeded shuffle of each epoch (default true). */
  shuffle?: boolean;
  /** Seed of the shuffle (default 42). */
  seed?: number;
  /** Evaluate every N optimizer steps (and after the last) when `evaluate` is given; 0 = only at the end. */
  evalEvery?: number;
  /** Checkpoint every N optimizer steps (the last step always checkpoints when a run directory is given). */
  checkpointEvery?: number;
}

export interface ObjectiveOutput {
  /** This micro-batch's share of the step loss (already divided by the step's total items). */
  loss: Tensor;
  /** Tokens the forward processed (for tokens/s). */
  tokens: number;
  /** Per-micro-batch metrics; the trainer averages them weighted by items. */
  metrics?: Record<string, number>;
}

export interface Objective<E> {
  /** Items of these examples that normalise the loss (target tokens, pairs, …); > 0. */
  items(examples: readonly E[]): number;
  loss(examples: readonly E[], stepItems: number): ObjectiveOutput;
}

/** What the trainer needs of a run directory (RunDir implements it). */
export interface TrainerRun {
  readonly path: string;
  logMetrics(record: Record<string, unknown>): void;
  dropMetrics(drop: (record: Record<string, unknown>) => boolean): void;
}

export interface TrainOptions<E> {
  /** Names the checkpoints folder and the metric lines ("sft", "dpo-turn-1", …). */
  stage: string;
  adapter: LoraAdapter;
  data: readonly E[];
  objective: Objective<E>;
  config: TrainConfig;
  run?: TrainerRun;
  /** Continue from the stage's latest checkpoint in `run` (a complete stage is only restored). */
  resume?: boolean;
  evaluate?: (step: number) => Promise<Record<string, number>> | Record<string, number>;
  onStep?: (record: StepRecord) => void;
  /** Progress line with tokens/s and ETA (default process.stderr; null silences it). */
  progress?: ProgressStream | null;
}

export interface StepRecord {
  stage: string;
  step: number;
  epoch: number;
  loss: number;
  lr: number;
  /** Global gradient norm before clipping. */
  grad_norm: number;
  num_items: number;
  num_tokens: number;
  [metric: string]: number | string;
}

export interface TrainResult {
  steps: number;
  history: StepRecord[];
  /** Step the run continued from (null = started fresh). */
  resumedFrom: number | null;
  lastCheckpoint: string | null;
}

/** Optimizer steps a configuration runs over `n` examples. */
export function plannedSteps(n: number, config: TrainConfig): number {
  if (config.maxSteps != null) return config.maxSteps;
  const perStep = (config.microBatchSize ?? 1) * (config.gradAccum ?? 1);
  return Math.ceil(((config.epochs ?? 1) * n) / perStep);
}

/**
 * Warmup steps of a stage: transformers' ceil(steps · ratio), capped so that more than half of the
 * steps run after warmup. Warmup's first step has lr 0; uncapped, a 1- or 2-step stage (ratio > 0)
 * never moved its weights.
 */
export function stageWarmupSteps(steps: number, ratio: number): number {
  return Math.min(warmupSteps(steps, ratio), Math.max(0, Math.floor((steps - 1) / 2)));
}

export function lrSchedule(config: TrainConfig, steps: number): LrSchedule {
  const warmup = stageWarmupSteps(steps, config.warmupRatio ?? 0);
  switch (config.schedule ?? "cosine") {
    case "cosine":
      return cosineSchedule(warmup, steps);
    case "linear":
      return linearSchedule(warmup, steps);
    case "constant":
      return constantSchedule(warmup);
    default:
      throw new TrainerError(`unknown schedule "${config.schedule}" (cosine | linear | constant)`);
  }
}

/** Seeded Fisher–Yates permutation of 0..n−1 for one epoch. */
export function epochOrder(n: number, seed: number, epoch: number, shuffle = true): Int32Array {
  const order = Int32Array.from({ length: n }, (_, i) => i);
  if (!shuffle) return order;
  const u = new Rng(seed, epoch + 1).uniform(n);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.min(i, Math.floor(u[i] * (i + 1)));
    const t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order;
}

function validate(config: TrainConfig, n: number): void {
  const positiveInt = (v: number | undefined, name: string) => {
    if (v !== undefined && !(Number.isInteger(v) && v >= 1))
      throw new TrainerError(`${name} must be a positive integer, got ${v}`);
  };
  positiveInt(config.microBatchSize, "microBatchSize");
  positiveInt(config.gradAccum, "gradAccum");
  positiveInt(config.maxSteps ?? undefined, "maxSteps");
  if (!(config.lr >= 0)) throw new TrainerError(`lr must be ≥ 0, got ${config.lr}`);
  if (config.epochs !== undefined && !(config.epochs > 0))
    throw new TrainerError(`epochs must be > 0, got ${config.epochs}`);
  const ratio = config.warmupRatio ?? 0;
  if (!(ratio >= 0 && ratio <= 1)) throw new TrainerError(`warmupRatio must be in [0, 1], got ${ratio}`);
  if (n === 0) throw new TrainerError("no training examples");
}

class StepProgress {
  private readonly start = performance.now();
  private tokens = 0;
  private last = 0;
  constructor(
    private readonly stream: ProgressStream | null,
    private readonly label: string,
    private readonly total: number,
    private readonly first: number,
  ) {}

  update(step: number, tokens: number, loss: number, final = false): void {
    this.tokens += tokens;
    if (!this.stream) return;
    const now = performance.now();
    if (!final && !this.stream.isTTY && now - this.last < 5000) return;
    this.last = now;
    const elapsed = (now - this.start) / 1000;
    const done = step - this.first;
    const perStep = done > 0 ? elapsed / done : 0;
    const eta = perStep > 0 && step < this.total ? ` ETA ${formatDuration(perStep * (this.total - step))}` : "";
    const rate = elapsed > 0 ? (this.tokens / elapsed).toFixed(0) : "-";
    const text = `${this.label} ${step}/${this.total} loss ${loss.toFixed(4)} ${rate} tok/s${eta}`;
    this.stream.write(this.stream.isTTY ? `\r\x1b[2K${text}${final ? "\n" : ""}` : `${text}\n`);
  }
}

function defaultStream(): ProgressStream | null {
  return (globalThis as { process?: { stderr?: ProgressStream } }).process?.stderr ?? null;
}

/** Run (or resume) one training stage. The adapter's parameters are what the optimizer updates. */
export async function train<E>(options: TrainOptions<E>): Promise<TrainResult> {
  const { stage, adapter, data, objective, config, run } = options;
  validate(config, data.length);
  const steps = plannedSteps(data.length, config);
  const micro = config.microBatchSize ?? 1;
  const accum = config.gradAccum ?? 1;
  const seed = config.seed ?? 42;
  const limit = config.maxSteps != null ? Number.POSITIVE_INFINITY : (config.epochs ?? 1) * data.length;
  const params = adapter.parameters();
  const optimizer = new AdamW(params, {
    lr: config.lr,
    weightDecay: config.weightDecay ?? 0,
    betas: config.betas,
    eps: config.eps,
  });
  const schedule = lrSchedule(config, steps);
  const history: StepRecord[] = [];
  let start = 0;
  let resumedFrom: number | null = null;
  let lastCheckpoint: string | null = null;
  // Each stage starts the shared RNG sequence (LoRA dropout) at 0, so a stage's draws do not depend
  // on what earlier stages (possibly skipped on resume) consumed.
  setRngSequencePosition(0);
  if (options.resume && run) {
    const latest = latestCheckpoint(run.path, stage);
    if (latest) {
      if (latest.state.max_steps !== steps)
        throw new TrainerError(
          `resume: ${latest.dir} was written for ${latest.state.max_steps} steps, this configuration runs ${steps}`,
        );
      await restoreTrainerCheckpoint(latest.dir, adapter, optimizer);
      start = latest.state.global_step;
      resumedFrom = start;
      lastCheckpoint = latest.dir;
      setRngSequencePosition(latest.state.rng_sequence);
      history.push(...(latest.state.log_history as StepRecord[]));
    }
  }
  run?.dropMetrics((r) => r.stage === stage && Number(r.step) > start);
  if (start >= steps) return { steps, history, resumedFrom, lastCheckpoint };

  const orders = new Map<number, Int32Array>();
  const exampleAt = (k: number): E => {
    const epoch = Math.floor(k / data.length);
    let order = orders.get(epoch);
    if (!order) {
      order = epochOrder(data.length, seed, epoch, config.shuffle ?? true);
      orders.clear();
      orders.set(epoch, order);
    }
    return data[order[k % data.length]];
  };
  const checkpoint = async (step: number, complete: boolean) => {
    if (!run) return;
    const state: TrainerState = {
      stage,
      global_step: step,
      max_steps: steps,
      cursor: Math.min(step * micro * accum, limit),
      epoch: Math.floor(Math.min(step * micro * accum, limit) / data.length),
      rng_sequence: rngSequencePosition(),
      seed,
      lr: optimizer.lr,
      log_history: history,
      complete,
    };
    lastCheckpoint = await saveTrainerCheckpoint(run.path, adapter, optimizer, state);
  };
  const runEval = async (step: number) => {
    if (!options.evaluate) return;
    adapter.train(false);
    const ev = await options.evaluate(step);
    run?.logMetrics({ stage, step, eval: true, ...ev });
    adapter.train(true);
  };

  const progress = new StepProgress(
    options.progress === undefined ? defaultStream() : options.progress,
    stage,
    steps,
    start,
  );
  adapter.train(true);
  try {
    for (let step = start; step < steps; step++) {
      // Without a turn of the event loop between steps a Ctrl-C waits for the next evaluation or checkpoint.
      await yieldToEventLoop();
      const from = step * micro * accum;
      const batches: E[][] = [];
      for (let a = 0; a < accum; a++) {
        const lo = from + a * micro;
        const hi = Math.min(lo + micro, limit);
        if (hi <= lo) break;
        batches.push(Array.from({ length: hi - lo }, (_, i) => exampleAt(lo + i)));
      }
      optimizer.zeroGrad();
      optimizer.lr = config.lr * schedule(step);
      const lr = optimizer.lr;
      const items = batches.map((b) => objective.items(b));
      const stepItems = items.reduce((a, b) => a + b, 0);
      if (!(stepItems > 0)) throw new TrainerError(`${stage} step ${step + 1}: the batch has no items to train on`);
      let loss = 0;
      let tokens = 0;
      const sums: Record<string, number> = {};
      batches.forEach((b, i) => {
        const out = objective.loss(b, stepItems);
        backward(out.loss);
        loss += out.loss.item();
        tokens += out.tokens;
        for (const [k, v] of Object.entries(out.metrics ?? {})) sums[k] = (sums[k] ?? 0) + v * (items[i] / stepItems);
      });
      const maxNorm = config.maxGradNorm ?? 1;
      const gradNorm = clipGradNorm(params, maxNorm > 0 ? maxNorm : Number.POSITIVE_INFINITY);
      if (!Number.isFinite(loss) || !Number.isFinite(gradNorm))
        throw new NonFiniteError(
          `${stage} step ${step + 1}: loss ${loss}, grad norm ${gradNorm}; stopped before the update` +
            (lastCheckpoint ? ` (last good checkpoint: ${lastCheckpoint})` : " (no checkpoint written yet)"),
          step + 1,
          lastCheckpoint,
        );
      optimizer.step();
      const record: StepRecord = {
        stage,
        step: step + 1,
        epoch: Math.min(from, limit - 1) / data.length,
        loss,
        lr,
        grad_norm: gradNorm,
        num_items: stepItems,
        num_tokens: tokens,
        ...sums,
      };
      record.epoch = Math.floor(record.epoch);
      history.push(record);
      run?.logMetrics(record);
      options.onStep?.(record);
      progress.update(step + 1, tokens, loss, step + 1 === steps);
      const done = step + 1;
      if (options.evaluate && config.evalEvery && done % config.evalEvery === 0 && done < steps) await runEval(done);
      if (config.checkpointEvery && done % config.checkpointEvery === 0 && done < steps) await checkpoint(done, false);
    }
  } finally {
    adapter.train(false);
  }
  await runEval(steps);
  await checkpoint(steps, true);
  return { steps, history, resumedFrom, lastCheckpoint };
}
