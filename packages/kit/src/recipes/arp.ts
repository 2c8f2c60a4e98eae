// ARP — Acquire, Repair, Preserve (architecture.md "The three recipes"): a schedule over
// package functions. (a) success-only SFT set → LoRA SFT with assistant-only labels;
// (b) turn-local DPO pairs from diagnosed failures; (c) branch-DPO pairs (fork the current
// policy at a turn, K samples, pair by downstream score); DPO on the same LoRA with the
// adapter-off model as reference; (d) training-free delta scaling s and an fp32 merge;
// (e) evaluation before and after. The maths lives in @kiln/losses and @kiln/lora.
import { type LoraAdapter, attachLora, mergeAdapter, parameterReport } from "@kiln/lora";
import { LocalPolicy, type Model } from "@kiln/models";
import { AdamW } from "@kiln/tensor";
import {
  type EpisodeLimits,
  type Environment,
  type GenerateParams,
  type Policy,
  type PreferencePair,
  type Trajectory,
  branchEpisode,
  branchPairs,
  runEpisodes,
} from "@kiln/rollout";
import { RunDir } from "../run-dir.js";
import { trainSft } from "../sft-trainer.js";
import {
  type ChatCodec,
  type Conversation,
  type PreferenceExample,
  conversationBatch,
  preferenceBatch,
} from "./batches.js";
import { diagnoseTrajectory, turnLocalPairs, type RepairFn } from "./diagnose.js";
import { trainDpo } from "./dpo-trainer.js";
import { type RecipeIo, evaluateEpisodes, progressBar, saveCheckpoint, writeRollouts } from "./recipe-run.js";
import { successOnlySftSet } from "./sft-set.js";

export interface LoraSettings {
  r: number;
  alpha: number;
  dropout?: number;
  targetModules?: string | string[];
  useRslora?: boolean;
}

export interface BranchDpoOptions {
  trajectories: readonly Trajectory[];
  makeEnv: () => Environment;
  policy: Policy;
  /** Alternatives per fork (default 4). */
  k?: number;
  /** Fork turn per trajectory (default: its first diagnosed turn, else turn 0). */
  pickTurn?: (t: Trajectory) => number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  minMargin?: number;
}

/** Branch-DPO pairs: fork each trajectory at a turn, sample K continuations, pair by downstream score. */
export async function branchDpoPairs(options: BranchDpoOptions): Promise<PreferencePair[]> {
  const pairs: PreferencePair[] = [];
  for (const t of options.trajectories) {
    if (t.turns.length === 0 || t.players) continue;
    const turn = options.pickTurn?.(t) ?? diagnoseTrajectory(t)[0]?.turn ?? 0;
    const result = await branchEpisode({
      trajectory: t,
      turn,
      k: options.k ?? 4,
      makeEnv: options.makeEnv,
      policy: options.policy,
      params: options.params,
      limits: options.limits,
      concurrency: 1,
    });
    pairs.push(...branchPairs(result, { minMargin: options.minMargin }));
  }
  return pairs;
}

export interface ArpOptions extends RecipeIo {
  model: Model;
  codec: ChatCodec;
  makeEnv: () => Environment;
  /** Acquired episodes (an expert's, a bigger model's, or earlier runs'): the SFT source and DPO references. */
  sourceTrajectories: readonly Trajectory[];
  /** Per-environment cap of the SFT set (default 64). */
  capPerEnv?: number;
  lora?: LoraSettings;
  sft?: { steps: number; lr: number; batchSize?: number };
  /** Student episodes played after SFT and diagnosed for turn-local pairs (default 4). */
  studentEpisodes?: number;
  /** Extra failing trajectories to diagnose besides the student's. */
  failingTrajectories?: readonly Trajectory[];
  maxChars?: number;
  repair?: RepairFn;
  /** Branch-DPO: trajectories forked (default: the student's, at most 2), K alternatives. */
  branch?: { k?: number; maxTrajectories?: number } | false;
  dpo?: { steps: number; lr: number; beta?: number; batchSize?: number };
  /** Delta scale s of the merge (default 0.85). */
  scale?: number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  /** Evaluation of a policy (default: success rate and score over `evalEpisodes` episodes). */
  evaluate?: (policy: Policy, phase: "before" | "after") => Promise<Record<string, number>>;
  evalEpisodes?: number;
  seed?: number;
}

export interface ArpResult {
  runDir: string;
  sftSize: number;
  sftLoss: { first: number; last: number } | null;
  turnPairs: number;
  branchPairs: number;
  dpoMargins: { first: number; last: number } | null;
  before: Record<string, number>;
  after: Record<string, number>;
  meanBf16DeltaLoss: number;
  adapter: LoraAdapter;
}

function cycle<T>(items: readonly T[], size: number, step: number): T[] {
  const n = Math.min(size, items.length);
  return Array.from({ length: n }, (_, i) => items[(step * n + i) % items.length]);
}

export async function runArp(options: ArpOptions): Promise<ArpResult> {
  const log = options.log ?? ((line: string) => console.error(line));
  const { model, codec } = options;
  const lora = options.lora ?? { r: 16, alpha: 32, dropout: 0 };
  const sft = options.sft ?? { steps: 20, lr: 5e-3, batchSize: 4 };
  const dpo = options.dpo ?? { steps: 20, lr: 5e-3, beta: 0.1, batchSize: 4 };
  const scale = options.scale ?? 0.85;
  const seed = options.seed ?? 0;
  const params: GenerateParams = { temperature: 1, maxTokens: 64, logprobs: true, ...options.params };
  const limits = options.limits ?? { maxTurns: 4 };
  const run = await RunDir.create(
    options.out ?? "runs",
    options.name ?? "arp",
    {
      recipe: "arp",
      lora,
      sft,
      dpo,
      scale,
      capPerEnv: options.capPerEnv ?? 64,
      params,
      limits,
      maxChars: options.maxChars ?? 400,
      branch: options.branch ?? {},
    },
    { seeds: { lora: seed, sampling: seed } },
  );
  log(`[kiln arp] run directory: ${run.path}`);
  const policy = new LocalPolicy({
    id: "arp-student",
    model,
    tokenizer: codec.tokenizer,
    chatTemplate: codec.template,
    defaults: params,
  });
  const evaluate =
    options.evaluate ??
    (async (p: Policy, phase: string) => {
      const r = await evaluateEpisodes({
        makeEnv: options.makeEnv,
        policy: p,
        episodes: options.evalEpisodes ?? 4,
        params: { ...params, temperature: 0 },
        limits,
      });
      await writeRollouts(run, `eval-${phase}.jsonl.gz`, r.trajectories);
      return r.summary as unknown as Record<string, number>;
    });

  // (e) before
  const before = await evaluate(policy, "before");
  run.logMetrics({ phase: "eval", when: "before", ...before });

  // (a) Acquire: success-only SFT set → LoRA SFT.
  await writeRollouts(run, "source.jsonl.gz", options.sourceTrajectories);
  const sftSet: Conversation[] = successOnlySftSet(options.sourceTrajectories, { capPerEnv: options.capPerEnv ?? 64 });
  const adapter = attachLora(model, { ...lora, targetModules: lora.targetModules ?? "all-linear", seed, name: "arp" });
  const counts = parameterReport(model, [adapter]);
  log(
    `[kiln arp] LoRA r=${lora.r} α=${lora.alpha}: ${counts.trainable} trainable params; SFT set ${sftSet.length} episodes`,
  );
  let sftLoss: ArpResult["sftLoss"] = null;
  let step = 0;
  if (sftSet.length > 0 && sft.steps > 0) {
    const bar = progressBar(options, "ARP SFT", sft.steps);
    adapter.train(true);
    const sftOptimizer = new AdamW(adapter.parameters(), { lr: sft.lr, weightDecay: 0 });
    const history = trainSft(
      model,
      adapter.parameters(),
      (s) => conversationBatch(codec, cycle(sftSet, sft.batchSize ?? 4, s)),
      { steps: sft.steps, lr: sft.lr, warmupRatio: 0.1, maxGradNorm: 1, optimizer: sftOptimizer },
      (m) => {
        run.logMetrics({ phase: "sft", ...m, step: step + m.step });
        bar.tick(1);
      },
    );
    adapter.train(false);
    bar.finish();
    step += sft.steps;
    sftLoss = { first: history[0].loss, last: history[history.length - 1].loss };
    await saveCheckpoint(run, step, adapter, { global_step: step, stage: "sft", log_history: history }, sftOptimizer);
    log(`[kiln arp] SFT loss ${sftLoss.first.toFixed(3)} → ${sftLoss.last.toFixed(3)}`);
  } else log("[kiln arp] no successful source episodes: SFT skipped");

  // (b) Repair: student episodes → diagnosed failing turns → turn-local pairs.
  const studentRun = await runEpisodes({
    makeEnv: options.makeEnv,
    policy,
    episodes: options.studentEpisodes ?? 4,
    baseSeed: seed,
    params,
    limits,
    concurrency: 1,
    progress: options.progress === false ? undefined : true,
    label: "ARP student episodes",
  });
  const student = studentRun.trajectories;
  await writeRollouts(run, "student.jsonl.gz", student);
  const turn = turnLocalPairs([...student, ...(options.failingTrajectories ?? [])], options.sourceTrajectories, {
    maxChars: options.maxChars ?? 400,
    repair: options.repair,
  });
  run.logMetrics({
    phase: "diagnose",
    diagnosed: turn.diagnosed.length,
    pairs: turn.pairs.length,
    unpaired: turn.unpaired,
    ...turn.byMode,
  });
  log(
    `[kiln arp] diagnosed ${turn.diagnosed.length} failing turns (${JSON.stringify(turn.byMode)}), ${turn.pairs.length} turn-local pairs`,
  );

  // (c) Branch-DPO pairs from the current policy.
  let branch: PreferencePair[] = [];
  if (options.branch !== false) {
    const forks = student.slice(0, options.branch?.maxTrajectories ?? 2);
    branch = await branchDpoPairs({
      trajectories: forks,
      makeEnv: options.makeEnv,
      policy,
      k: options.branch?.k ?? 4,
      params,
      limits,
    });
    log(`[kiln arp] branch-DPO: ${branch.length} pairs from ${forks.length} forks`);
  }
  const pairs: PreferenceExample[] = [
    ...turn.pairs,
    ...branch.map((p) => ({ prompt: p.prompt, chosen: p.chosen, rejected: p.rejected, tools: student[0]?.tools })),
  ];
  await run.writeJson("pairs.json", {
    turnLocal: turn.pairs.map((p) => ({ source: p.source, chosen: p.chosen, rejected: p.rejected })),
    branch: branch.map((p) => ({
      source: p.source,
      chosenScore: p.chosenScore,
      rejectedScore: p.rejectedScore,
      chosen: p.chosen,
      rejected: p.rejected,
    })),
  });

  // DPO on the same LoRA; the reference is the adapter-off model.
  let dpoMargins: ArpResult["dpoMargins"] = null;
  if (pairs.length > 0 && dpo.steps > 0) {
    const bar = progressBar(options, "ARP DPO", dpo.steps);
    const optimizer = new AdamW(adapter.parameters(), { lr: dpo.lr });
    const history = trainDpo(
      model,
      adapter,
      (s) => preferenceBatch(codec, cycle(pairs, dpo.batchSize ?? 4, s)),
      { steps: dpo.steps, lr: dpo.lr, beta: dpo.beta ?? 0.1, optimizer },
      (m) => {
        run.logMetrics({ phase: "dpo", ...m, step: step + m.step });
        bar.tick(1);
      },
    );
    bar.finish();
    step += dpo.steps;
    dpoMargins = { first: history[0]["rewards/margins"], last: history[history.length - 1]["rewards/margins"] };
    await saveCheckpoint(run, step, adapter, { global_step: step, stage: "dpo", log_history: history }, optimizer);
    log(`[kiln arp] DPO rewards/margins ${dpoMargins.first.toFixed(4)} → ${dpoMargins.last.toFixed(4)}`);
  } else log("[kiln arp] no preference pairs: DPO skipped");

  // (d) Preserve: training-free delta scaling s, fp32 merge.
  const report = mergeAdapter(adapter, { scale, dtype: "f32", keepOriginal: false });
  run.logMetrics({
    phase: "merge",
    scale,
    mean_bf16_delta_loss: report.meanBf16DeltaLoss,
    max_bf16_delta_loss: report.maxBf16DeltaLoss,
  });
  log(`[kiln arp] merged with s=${scale} in fp32`);

  const after = await evaluate(policy, "after");
  run.logMetrics({ phase: "eval", when: "after", ...after });
  await run.writeJson("summary.json", {
    sftSize: sftSet.length,
    sftLoss,
    turnPairs: turn.pairs.length,
    branchPairs: branch.length,
    dpoMargins,
    before,
    after,
    meanBf16DeltaLoss: report.meanBf16DeltaLoss,
  });
  const files = await run.finalize();
  log(`[kiln arp] wrote SHA256SUMS over ${files} files`);
  return {
    runDir: run.path,
    sftSize: sftSet.length,
    sftLoss,
    turnPairs: turn.pairs.length,
    branchPairs: branch.length,
    dpoMargins,
    before,
    after,
    meanBf16DeltaLoss: report.meanBf16DeltaLoss,
    adapter,
  };
}
