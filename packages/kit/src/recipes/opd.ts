// OPD rounds (architecture.md "The three recipes"; numerics.md §4): each round the student
// plays (optionally from seeded wall-state starts), the teacher scores the same tokens, the
// per-token advantage −(log q_student − log p_teacher) is clamped to ±c and early turns are
// weighted, a fresh LoRA is updated with the PPO-clipped importance-sampled objective, then
// merged in fp32 and the next round starts (AdapterChain). Evaluation runs after every round.
// The sampler log-probs are those LocalPolicy records: log-softmax of the raw logits (before
// temperature or top-k/p), i.e. the rollout policy's own log-probs, the PPO "old policy". At the
// default temperature 1 without truncation they are also the sampling distribution's.
import { AdapterChain } from "@kiln/lora";
import { LocalPolicy, type Model } from "@kiln/models";
import {
  type EpisodeLimits,
  type EpisodeSpec,
  type Environment,
  type GenerateParams,
  type Policy,
  episodeSpecs,
  runEpisodes,
} from "@kiln/rollout";
import { AdamW, type Tensor, backward, clipGradNorm } from "@kiln/tensor";
import { RunDir } from "../run-dir.js";
import type { LoraSettings } from "./arp.js";
import type { ChatCodec } from "./batches.js";
import { RecipeError } from "./errors.js";
import { type OpdSample, scoreWithTeacher } from "./opd-samples.js";
import { type OpdObjectiveOptions, opdBatchLoss } from "./opd-update.js";
import { type RecipeIo, evaluateEpisodes, progressBar, saveCheckpoint, writeRollouts } from "./recipe-run.js";

export interface OpdTrainConfig extends OpdObjectiveOptions {
  /** Optimizer steps per round. */
  steps: number;
  lr: number;
  /** Samples (turns) per step (default 4). */
  batchSize?: number;
  maxGradNorm?: number;
  /** Use this optimizer (over `params`) instead of a fresh AdamW, e.g. to checkpoint it. */
  optimizer?: AdamW;
}

export interface OpdStepMetrics {
  step: number;
  loss: number;
  grad_norm: number;
  teacher_kl: number;
  advantage_mean: number;
  clip_fraction: number;
}

/** Update `params` on fixed teacher-scored samples (sampler log-probs stay those of the rollout). */
export function trainOpd(
  model: Model,
  params: Tensor[],
  samples: readonly OpdSample[],
  config: OpdTrainConfig,
  onStep?: (m: OpdStepMetrics) => void,
): OpdStepMetrics[] {
  if (samples.length === 0) throw new RecipeError("trainOpd: no teacher-scored samples");
  const opt = config.optimizer ?? new AdamW(params, { lr: config.lr });
  const bs = Math.min(config.batchSize ?? 4, samples.length);
  const history: OpdStepMetrics[] = [];
  for (let step = 0; step < config.steps; step++) {
    opt.zeroGrad();
    const batch = Array.from({ length: bs }, (_, i) => samples[(step * bs + i) % samples.length]);
    const out = opdBatchLoss(model, batch, config);
    backward(out.loss);
    const gradNorm = clipGradNorm(params, config.maxGradNorm ?? 1);
    opt.step();
    const m: OpdStepMetrics = {
      step: step + 1,
      loss: out.loss.item(),
      grad_norm: gradNorm,
      teacher_kl: out.metrics.teacher_kl,
      advantage_mean: out.metrics["advantage/mean"],
      clip_fraction: out.metrics.clip_fraction ?? 0,
    };
    history.push(m);
    onStep?.(m);
  }
  return history;
}

export interface OpdOptions extends RecipeIo {
  model: Model;
  codec: ChatCodec;
  makeEnv: () => Environment;
  /** Any Policy with score(): a bigger local model, or scaffoldedTeacher(student, hint). */
  teacher: Policy | ((student: Policy) => Policy);
  rounds?: number;
  episodesPerRound?: number;
  /** Seeded starts (e.g. questworld wall states) mixed into each round's episodes. */
  starts?: (round: number) => EpisodeSpec[];
  /** Fresh LoRA per round (default r = 64, α = 64, no rsLoRA). */
  lora?: LoraSettings;
  train?: OpdTrainConfig;
  /** Merge scale of each round's adapter (default 1). */
  scale?: number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  /** Evaluation after each round (default: episodes of the environment; the CLI uses questworld Core-3). */
  evaluate?: (policy: Policy, round: number) => Promise<Record<string, number>>;
  evalEpisodes?: number;
  seed?: number;
}

export interface OpdRoundResult {
  round: number;
  samples: number;
  teacherKlFirst: number;
  teacherKlLast: number;
  lossFirst: number;
  lossLast: number;
  eval: Record<string, number>;
}

export async function runOpdRounds(
  options: OpdOptions,
): Promise<{ runDir: string; rounds: OpdRoundResult[]; baseline: Record<string, number> }> {
  const log = options.log ?? ((line: string) => console.error(line));
  const { model, codec } = options;
  const lora = options.lora ?? { r: 64, alpha: 64, dropout: 0, useRslora: false };
  const train: OpdTrainConfig = {
    steps: 8,
    lr: 1e-3,
    batchSize: 4,
    clamp: 3,
    earlyTurnWeight: 1.5,
    objective: "ppo",
    ...options.train,
  };
  const rounds = options.rounds ?? 2;
  const seed = options.seed ?? 0;
  const params: GenerateParams = { temperature: 1, maxTokens: 64, ...options.params, logprobs: true };
  const limits = options.limits ?? { maxTurns: 4 };
  const run = await RunDir.create(
    options.out ?? "runs",
    options.name ?? "opd",
    {
      recipe: "opd",
      lora,
      train,
      rounds,
      episodesPerRound: options.episodesPerRound ?? 4,
      scale: options.scale ?? 1,
      params,
      limits,
    },
    { seeds: { lora: seed, sampling: seed } },
  );
  log(`[kiln opd] run directory: ${run.path}`);
  const student = new LocalPolicy({
    id: "opd-student",
    model,
    tokenizer: codec.tokenizer,
    chatTemplate: codec.template,
    defaults: params,
  });
  const teacher = typeof options.teacher === "function" ? options.teacher(student) : options.teacher;
  const evaluate =
    options.evaluate ??
    (async (p: Policy, round: number) => {
      const r = await evaluateEpisodes({
        makeEnv: options.makeEnv,
        policy: p,
        episodes: options.evalEpisodes ?? 4,
        params: { ...params, temperature: 0 },
        limits,
      });
      await writeRollouts(run, `eval-round-${round}.jsonl.gz`, r.trajectories);
      return r.summary as unknown as Record<string, number>;
    });
  const baseline = await evaluate(student, 0);
  run.logMetrics({ phase: "eval", round: 0, ...baseline });

  const chain = new AdapterChain(model, {
    r: lora.r,
    alpha: lora.alpha,
    dropout: lora.dropout ?? 0,
    useRslora: lora.useRslora ?? false,
    targetModules: lora.targetModules ?? "all-linear",
    seed,
    name: "opd",
  });
  const results: OpdRoundResult[] = [];
  let step = 0;
  for (let round = 1; round <= rounds; round++) {
    const episodes = [
      ...episodeSpecs(options.episodesPerRound ?? 4, seed + round, `round-${round}`),
      ...(options.starts?.(round) ?? []),
    ];
    const rollouts = await runEpisodes({
      makeEnv: options.makeEnv,
      policy: student,
      episodes,
      params,
      limits,
      concurrency: 1,
      progress: options.progress === false ? undefined : true,
      label: `OPD round ${round} rollouts`,
    });
    await writeRollouts(run, `round-${round}.jsonl.gz`, rollouts.trajectories);
    const { samples, skipped } = await scoreWithTeacher(rollouts.trajectories, teacher);
    if (samples.length === 0) throw new RecipeError(`OPD round ${round}: no student turn carried tokens and log-probs`);
    const bar = progressBar(options, `OPD round ${round} update`, train.steps);
    const adapter = chain.current;
    const optimizer = new AdamW(adapter.parameters(), { lr: train.lr });
    const history = trainOpd(model, adapter.parameters(), samples, { ...train, optimizer }, (m) => {
      run.logMetrics({ phase: "opd", round, ...m, step: step + m.step });
      bar.tick(1);
    });
    bar.finish();
    step += train.steps;
    await saveCheckpoint(
      run,
      step,
      adapter,
      {
        global_step: step,
        round,
        samples: samples.length,
        skipped,
        log_history: history,
      },
      optimizer,
    );
    await chain.advance({ scale: options.scale ?? 1 });
    const ev = await evaluate(student, round);
    run.logMetrics({ phase: "eval", round, ...ev });
    const r: OpdRoundResult = {
      round,
      samples: samples.length,
      teacherKlFirst: history[0].teacher_kl,
      teacherKlLast: history[history.length - 1].teacher_kl,
      lossFirst: history[0].loss,
      lossLast: history[history.length - 1].loss,
      eval: ev,
    };
    results.push(r);
    log(
      `[kiln opd] round ${round}: ${samples.length} turns, teacher_kl ${r.teacherKlFirst.toFixed(3)}, loss ${r.lossFirst.toFixed(4)} → ${r.lossLast.toFixed(4)}, eval ${JSON.stringify(ev)}`,
    );
  }
  // The chain attached a fresh (zero-B, identity) adapter after the last merge; drop it.
  chain.current.detach();
  await run.writeJson("summary.json", { baseline, rounds: results });
  const files = await run.finalize();
  log(`[kiln opd] wrote SHA256SUMS over ${files} files`);
  return { runDir: run.path, rounds: results, baseline };
}
