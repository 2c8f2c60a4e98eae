// OEL (architecture.md "The three recipes"): deploy → consolidate → merge → evaluate.
// Deploy: the student plays each task without its memory; turns are recorded with their tokens.
// Consolidate: the same turns are re-scored by the same model (adapter off = the model being
// consolidated) with the task's memory in its system prompt; those logits are the teacher's,
// and the student (adapter on, no memory) is fitted to them with a token-level full-vocabulary
// divergence (@kiln/losses distillationLoss; TRL SDFT/GKD full_logits, numerics.md §3).
// Merge the adapter in fp32, then evaluate pass^k with standard errors (tau2's estimator).
import { tau2 } from "@kiln/benchmarks";
import { type DivergenceKind, distillationLoss } from "@kiln/losses";
import { attachLora, mergeAdapter } from "@kiln/lora";
import { LocalPolicy, type Model } from "@kiln/models";
import {
  type EpisodeLimits,
  type Environment,
  type GenerateParams,
  type Message,
  type Policy,
  type ToolSchema,
  type Trajectory,
  messagesBeforeTurn,
  runEpisodes,
} from "@kiln/rollout";
import { AdamW, Tensor, backward, clipGradNorm, noGrad, reshape } from "@kiln/tensor";
import { RunDir } from "../run-dir.js";
import type { LoraSettings } from "./arp.js";
import type { ChatCodec } from "./batches.js";
import { RecipeError } from "./errors.js";
import { type RecipeIo, progressBar, saveCheckpoint, writeRollouts } from "./recipe-run.js";
import { isSuccessful } from "./sft-set.js";
import { withSystemNote } from "./system-note.js";

export interface OelTask {
  id: string;
  seed: number;
  /** What the agent should remember for this task (notes, rules, a past solution). */
  memory: string;
  /** Optional saved environment state to start from. */
  state?: unknown;
}

export interface ConsolidationSample {
  episodeId: string;
  turn: number;
  /** Prompt the student saw (no memory). */
  studentPromptIds: number[];
  /** The same conversation with the memory in the system prompt. */
  teacherPromptIds: number[];
  completionIds: number[];
}

function promptIds(codec: ChatCodec, messages: Message[], tools?: ToolSchema[]): number[] {
  return codec.tokenizer.encode(codec.template.render(messages, { tools, addGenerationPrompt: true }));
}

/** Consolidation samples: each deployed turn, with and without the task's memory. */
export function consolidationSamples(
  codec: ChatCodec,
  trajectories: readonly Trajectory[],
  memoryOf: (t: Trajectory) => string,
): ConsolidationSample[] {
  const out: ConsolidationSample[] = [];
  for (const traj of trajectories) {
    const memory = memoryOf(traj);
    for (const turn of traj.turns) {
      const ids = turn.completionTokenIds;
      if (!ids || ids.length === 0) continue;
      const messages = messagesBeforeTurn(traj, turn.index);
      out.push({
        episodeId: traj.episodeId,
        turn: turn.index,
        studentPromptIds: turn.promptTokenIds ? [...turn.promptTokenIds] : promptIds(codec, messages, traj.tools),
        teacherPromptIds: promptIds(codec, withSystemNote(messages, memory), traj.tools),
        completionIds: [...ids],
      });
    }
  }
  return out;
}

function padded(rows: number[][], pad: number) {
  const B = rows.length;
  const T = Math.max(...rows.map((r) => r.length));
  const ids = new Int32Array(B * T).fill(pad);
  const attention = new Int32Array(B * T);
  rows.forEach((r, b) => {
    ids.set(r, b * T);
    attention.fill(1, b * T, b * T + r.length);
  });
  return { B, T, ids: new Tensor(ids, [B, T], "i32"), attention: new Tensor(attention, [B, T], "i32") };
}

export interface ConsolidateOptions {
  /** "forward_kl" = KL(teacher‖student) (default), "reverse_kl", or "jsd" with `beta`. */
  kind?: DivergenceKind;
  beta?: number;
  temperature?: number;
}

/**
 * Divergence between the student (gradient on) and teacher logits on each completion token.
 * `teacherLogits(ids, attention)` runs the teacher (no gradient), e.g. the adapter-off model.
 */
export function consolidationLoss(
  model: Model,
  teacherLogits: (ids: Tensor, attention: Tensor) => Tensor,
  samples: readonly ConsolidationSample[],
  options: ConsolidateOptions = {},
  padId = 0,
) {
  if (samples.length === 0) throw new RecipeError("consolidationLoss: no samples");
  for (const x of samples)
    if (x.studentPromptIds.length === 0 || x.teacherPromptIds.length === 0)
      throw new RecipeError(`consolidationLoss: ${x.episodeId} turn ${x.turn} has an empty prompt`);
  const s = padded(
    samples.map((x) => [...x.studentPromptIds, ...x.completionIds]),
    padId,
  );
  const t = padded(
    samples.map((x) => [...x.teacherPromptIds, ...x.completionIds]),
    padId,
  );
  const studentLogits = model.forward(s.ids, { attentionMask: s.attention });
  const teacher = noGrad(() => teacherLogits(t.ids, t.attention));
  const V = studentLogits.shape[2];
  const mask = new Uint8Array(s.B * s.T);
  const teacherRows = new Int32Array(s.B * s.T);
  samples.forEach((x, b) => {
    // Row P+j−1 predicts completion token j in both renders.
    for (let j = 0; j < x.completionIds.length; j++) {
      const r = b * s.T + x.studentPromptIds.length + j - 1;
      mask[r] = 1;
      teacherRows[r] = b * t.T + x.teacherPromptIds.length + j - 1;
    }
  });
  return distillationLoss(reshape(studentLogits, [s.B * s.T, V]), reshape(teacher, [t.B * t.T, V]), {
    kind: options.kind ?? "forward_kl",
    beta: options.beta,
    temperature: options.temperature,
    mask,
    teacherRows,
  });
}

export interface OelOptions extends RecipeIo {
  model: Model;
  codec: ChatCodec;
  makeEnv: () => Environment;
  tasks: readonly OelTask[];
  lora?: LoraSettings;
  consolidate?: ConsolidateOptions & { steps: number; lr: number; batchSize?: number };
  scale?: number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  /** Trials per task in the evaluation (pass^k for k = 1..trials; default 2). */
  evalTrials?: number;
  /** Override the evaluation (e.g. a real tau2 run against a served model). */
  evaluate?: (policy: Policy, phase: "before" | "after") => Promise<Record<string, number>>;
  seed?: number;
}

/** pass^k with standard errors over `trials` trials per task (tau2's estimator and SE). */
export async function passHatKEval(options: {
  makeEnv: () => Environment;
  policy: Policy;
  tasks: readonly OelTask[];
  trials: number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
}): Promise<{ summary: tau2.PassHatKSummary; trajectories: Trajectory[] }> {
  const specs = options.tasks.flatMap((task) =>
    Array.from({ length: options.trials }, (_, i) => ({
      id: `${task.id}#${i}`,
      seed: task.seed + 7919 * i,
      state: task.state,
      metadata: { task: task.id },
    })),
  );
  const r = await runEpisodes({
    makeEnv: options.makeEnv,
    policy: options.policy,
    episodes: specs,
    params: options.params,
    limits: options.limits,
    concurrency: 1,
  });
  const outcomes = r.trajectories.map((t) => ({
    taskId: String(t.metadata.task ?? t.episodeId.split("#")[0]),
    reward: t.outcome.score,
    success: isSuccessful(t),
  }));
  return { summary: tau2.summarizePassHatK(outcomes), trajectories: r.trajectories };
}

function flatPassK(s: tau2.PassHatKSummary): Record<string, number> {
  const out: Record<string, number> = {
    tasks: s.numTasks,
    simulations: s.numSimulations,
    avg_reward: s.avgReward,
    avg_reward_se: s.avgRewardStderr,
  };
  for (const p of s.passHatK) {
    out[`pass^${p.k}`] = p.value;
    out[`pass^${p.k}_se`] = p.stderr;
  }
  return out;
}

export interface OelResult {
  runDir: string;
  samples: number;
  lossFirst: number;
  lossLast: number;
  before: Record<string, number>;
  after: Record<string, number>;
}

export async function runOel(options: OelOptions): Promise<OelResult> {
  const log = options.log ?? ((line: string) => console.error(line));
  const { model, codec } = options;
  if (options.tasks.length === 0) throw new RecipeError("runOel: no tasks to deploy on");
  const lora = options.lora ?? { r: 16, alpha: 32, dropout: 0 };
  const cons = { steps: 10, lr: 2e-3, batchSize: 4, kind: "forward_kl" as DivergenceKind, ...options.consolidate };
  const seed = options.seed ?? 0;
  const params: GenerateParams = { temperature: 1, maxTokens: 64, ...options.params };
  const limits = options.limits ?? { maxTurns: 4 };
  const trials = options.evalTrials ?? 2;
  const run = await RunDir.create(
    options.out ?? "runs",
    options.name ?? "oel",
    {
      recipe: "oel",
      lora,
      consolidate: cons,
      scale: options.scale ?? 1,
      params,
      limits,
      tasks: options.tasks.map((t) => t.id),
      evalTrials: trials,
    },
    { seeds: { lora: seed, sampling: seed } },
  );
  log(`[kiln oel] run directory: ${run.path}`);
  const student = new LocalPolicy({
    id: "oel-student",
    model,
    tokenizer: codec.tokenizer,
    chatTemplate: codec.template,
    defaults: params,
  });
  const evaluate =
    options.evaluate ??
    (async (p: Policy, phase: string) => {
      const r = await passHatKEval({
        makeEnv: options.makeEnv,
        policy: p,
        tasks: options.tasks,
        trials,
        params: { ...params, temperature: 0.7 },
        limits,
      });
      await writeRollouts(run, `eval-${phase}.jsonl.gz`, r.trajectories);
      return flatPassK(r.summary);
    });
  const before = await evaluate(student, "before");
  run.logMetrics({ phase: "eval", when: "before", ...before });

  // Deploy: no memory in the prompt.
  const memory = new Map(options.tasks.map((t) => [t.id, t.memory]));
  const deployed = await runEpisodes({
    makeEnv: options.makeEnv,
    policy: student,
    episodes: options.tasks.map((t) => ({ id: t.id, seed: t.seed, state: t.state })),
    params,
    limits,
    concurrency: 1,
    progress: options.progress === false ? undefined : true,
    label: "OEL deploy",
  });
  await writeRollouts(run, "deploy.jsonl.gz", deployed.trajectories);

  // Consolidate.
  const samples = consolidationSamples(codec, deployed.trajectories, (t) => memory.get(t.episodeId) ?? "");
  if (samples.length === 0) throw new RecipeError("runOel: the deployed episodes have no recorded completion tokens");
  const adapter = attachLora(model, { ...lora, targetModules: lora.targetModules ?? "all-linear", seed, name: "oel" });
  const params_ = adapter.parameters();
  const opt = new AdamW(params_, { lr: cons.lr });
  const bar = progressBar(options, "OEL consolidate", cons.steps);
  const teacher = (ids: Tensor, attention: Tensor) =>
    adapter.withDisabled(() => model.forward(ids, { attentionMask: attention }));
  const pad = codec.tokenizer.padTokenId ?? 0;
  const bs = Math.min(cons.batchSize ?? 4, samples.length);
  const history: { step: number; loss: number; grad_norm: number; num_tokens: number }[] = [];
  adapter.train(true);
  for (let step = 0; step < cons.steps; step++) {
    opt.zeroGrad();
    const batch = Array.from({ length: bs }, (_, i) => samples[(step * bs + i) % samples.length]);
    const out = consolidationLoss(model, teacher, batch, cons, pad);
    backward(out.loss);
    const gradNorm = clipGradNorm(params_, 1);
    opt.step();
    const m = { step: step + 1, loss: out.loss.item(), grad_norm: gradNorm, num_tokens: out.metrics.num_tokens };
    history.push(m);
    run.logMetrics({ phase: "consolidate", ...m });
    bar.tick(1);
  }
  adapter.train(false);
  bar.finish();
  await saveCheckpoint(
    run,
    cons.steps,
    adapter,
    {
      global_step: cons.steps,
      samples: samples.length,
      log_history: history,
    },
    opt,
  );
  const report = mergeAdapter(adapter, { scale: options.scale ?? 1, dtype: "f32", keepOriginal: false });
  run.logMetrics({ phase: "merge", scale: options.scale ?? 1, mean_bf16_delta_loss: report.meanBf16DeltaLoss });

  const after = await evaluate(student, "after");
  run.logMetrics({ phase: "eval", when: "after", ...after });
  const result: OelResult = {
    runDir: run.path,
    samples: samples.length,
    lossFirst: history[0]?.loss ?? Number.NaN,
    lossLast: history[history.length - 1]?.loss ?? Number.NaN,
    before,
    after,
  };
  await run.writeJson("summary.json", result);
  const files = await run.finalize();
  log(
    `[kiln oel] consolidation loss ${result.lossFirst.toFixed(4)} → ${result.lossLast.toFixed(4)}; SHA256SUMS over ${files} files`,
  );
  return result;
}
