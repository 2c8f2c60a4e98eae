// The ARP table: base → A SFT → B1 → B2 → C branch-DPO (the whole delta, s = 1) → W₀ + s·ΣΔ merged
// in fp32, plus the same scaled delta merged into bf16 weights. Each phase is judged as the seed cards
// judge it: clemscore over held-out instances of every clembench game the agent model plays (arp-clem.ts),
// per game quality and % played, and statscore (BBH, EQ-Bench slices) with the held-out NLL per token as
// the static score; the seed's published clemscore per phase stands beside kiln's. runArp runs the stages
// (and its own training-game evaluation); this module adds the rest per phase (runArp's onPhase hook) and
// the variant rows, which re-merge the run's saved adapter (base + adapter/ = model/) into a fresh copy of
// the base — no retraining, so the `scale` ablation costs only evaluations.
import { join } from "node:path";
import { loadAdapter, mergeAdapter } from "@kiln/lora";
import type { Model } from "@kiln/models";
import { GuessNumberEnv, ScriptedPolicy, type Trajectory, episodeSpecs } from "@kiln/rollout";
import { GUESS_NUMBER_MAX_TURNS } from "../agent-model/corpus.js";
import { guessNumberDiagnose, guessPlayerScript } from "../agent-model/guess-number-players.js";
import { agentModelHeldoutPath } from "../agent-model/paths.js";
import type { ChatCodec } from "../trainer/chat-batches.js";
import { type ArpResult, acquireExpertEpisodes, runArp } from "../recipes/arp.js";
import { acquireClemEpisodes, clemArpTraining } from "./arp-games.js";
import { type PhaseEval, evaluatePhase } from "../recipes/recipe-run.js";
import {
  ARP_SEED_SOURCE,
  type ClemPhase,
  PhaseEvalMemo,
  arpClemEpisodes,
  clemErrors,
  clemPhaseEval,
  clemPolicy,
  renameClemPhase,
} from "./arp-clem.js";
import type { ReproConfig } from "./config.js";
import { ReproError } from "./errors.js";
import type { ModelSource } from "./model-source.js";
import { type ReproEpisodeError, type ReproResult, secondsSince } from "./output.js";
import { type StaticScore, heldoutTexts, staticScore } from "./static-score.js";
import { arpClemTable, arpGamesTable, arpSeedsTable } from "./arp-clem-table.js";
import { type ReproTable, fmt, fmtDelta, scoreBar, summarizeScores } from "./table.js";

export interface ReproIo {
  /** Root directory (default "runs"). */
  out?: string;
  /** The repro directory itself (default: <out>/repro-arp[-<ablation>]). */
  dir?: string;
  log?: (line: string) => void;
  progress?: boolean;
}

export interface ArpRow {
  label: string;
  /** runArp's own evaluation (its training game's held-out episodes). */
  eval: PhaseEval;
  static: StaticScore;
  /** clemscore and statscore of the phase (held-out clembench instances). */
  clem: ClemPhase;
  seconds: number;
}

const PHASE_LABELS: Record<string, string> = {
  base: "base",
  sft: "A  SFT (success-only)",
  "targeted-sft": "A2 targeted SFT (weakest games)",
  "turn-dpo-1": "B1 turn-DPO (repeat, length)",
  "turn-dpo-2": "B2 turn-DPO (invalid, duplicate field)",
  "branch-dpo": "C  branch-DPO (whole delta, s = 1)",
};

/** The ARP table's rows as Markdown-ready cells, paired against the first row (the base). */
export function arpTable(title: string, rows: readonly ArpRow[], notes: string[] = []): ReproTable {
  const base = rows[0];
  return {
    title,
    header: [
      "phase",
      "n",
      "success ± SE",
      "score ± SE",
      "Δ score vs base ± SE",
      "held-out NLL/token ± SE",
      "ppl",
      "Δ NLL vs base ± SE",
    ],
    rows: rows.map((r) => {
      const st = summarizeScores(r.static.perText, r === base ? undefined : base.static.perText);
      return [
        r.label,
        String(r.eval.n),
        fmt(r.eval.success),
        fmt(r.eval.score),
        r === base ? "—" : fmtDelta(r.eval.delta),
        `${fmt(st.score)} (${st.n})`,
        Number.isFinite(r.static.perplexity) ? r.static.perplexity.toFixed(2) : "n/a",
        r === base ? "—" : fmtDelta(st.delta),
      ];
    }),
    notes,
    chart: {
      xLabel: "score per held-out episode, mean ± SE",
      bars: rows.map((r) => scoreBar(r.label, r.eval.score, r.eval.n, r === base ? undefined : r.eval.delta)),
    },
  };
}

interface ArpRun {
  rows: ArpRow[];
  /** The run's saved adapter: s·ΣΔ relative to the base. */
  adapterDir: string;
  runDir: string;
  texts: string[];
  textSource: string;
  details: Record<string, unknown>;
  /** Phases (and variant rows) whose weights were bit-identical to an evaluated one's: phase → that one. */
  reusedEvaluations: Record<string, string>;
  evalVariant: (
    label: string,
    prepare: (model: Model) => Promise<void>,
  ) => Promise<ArpRow & { model: Model; codec: ChatCodec }>;
}

/**
 * Guess-number as the agent model's corpus plays it: the acquired episodes come from the corpus's
 * own bisecting player (replies are the bare tool call, the format the model learnt), with the
 * corpus's turn limit.
 */
export function guessNumberArpSetup() {
  return {
    makeEnv: () => new GuessNumberEnv(),
    expert: new ScriptedPolicy({ id: "bisect-expert", script: guessPlayerScript("bisect") }),
    expertTurns: GUESS_NUMBER_MAX_TURNS,
    // Invalid = a guess the feedback already ruled out; turn-local pairs take the expert's guess as chosen.
    diagnose: guessNumberDiagnose(),
  };
}

/** The acquired episodes: the expert's games on the ARP config's source seeds (phase A's data). */
export function expertSourceEpisodes(c: ReproConfig["arp"]): Promise<Trajectory[]> {
  return acquireExpertEpisodes(guessNumberArpSetup(), c.data.sourceEpisodes, c.seed);
}

/** Run ARP on guess-number from the source's base with the static score per phase. */
export async function runArpWithStatic(
  source: ModelSource,
  config: ReproConfig,
  dir: string,
  name: string,
  io: ReproIo,
  /** The DPO stages' reference model (default: the previous stage's policy, runArp's own). */
  dpoReferenceModel?: Model,
): Promise<ArpRun> {
  const log = io.log ?? ((l: string) => console.error(l));
  const c = structuredClone(config.arp);
  // The model directory's own held-out set first (the agent model ships one), then the embedded model's.
  const { texts, source: textSource } = heldoutTexts(config.staticScore.maxTexts, [
    ...(source.dir ? [join(source.dir, "heldout.txt")] : []),
    agentModelHeldoutPath(),
  ]);
  const { model, codec } = await source.load();
  const setup = guessNumberArpSetup();
  // ARP trains on the clemscore's games (A/A2 over all of them, B/C on Wordle); guess-number when there are none.
  const clemTraining = config.arpClem.games.length > 0 ? clemArpTraining(config.arpClem.games) : null;
  // Chosen (and every game name checked) before anything trains; every phase plays the same episodes.
  const clemEpisodes = arpClemEpisodes(config.arpClem);
  // The static score and clemscore of a model; a phase with the same weights as an evaluated one reuses them.
  const memo = new PhaseEvalMemo<{ static: StaticScore; clem: ClemPhase; seconds: { static: string; clem: string } }>();
  const evalWeights = (phase: string, m: Model, cc: ChatCodec) =>
    memo.get(
      phase,
      m,
      async () => {
        const staticStart = phaseClock();
        const st = staticScore(m, cc.tokenizer, texts, config.staticScore.windowTokens);
        const staticTime = staticStart.elapsed();
        const clemStart = phaseClock();
        const clem = await clemPhaseEval({
          phase,
          policy: clemPolicy(`arp-clem-${phase}`, m, cc, config.arpClem.batching ?? true),
          config: config.arpClem,
          episodes: clemEpisodes,
        });
        return { static: st, clem, seconds: { static: staticTime, clem: clemStart.elapsed() } };
      },
      (e) => ({ ...e, clem: renameClemPhase(e.clem, phase) }),
    );
  let mark = performance.now();
  let markCpu = process.cpuUsage();
  const sourceTrajectories = clemTraining
    ? await acquireClemEpisodes(clemTraining.games, c.data.sourceEpisodes)
    : await expertSourceEpisodes(c);
  log(
    `[kiln arp] time acquisition (${sourceTrajectories.length} expert episodes): ${phaseClock(mark, markCpu).elapsed()}`,
  );
  mark = performance.now();
  markCpu = process.cpuUsage();
  const rows: ArpRow[] = [];
  const result = await runArp({
    out: dir,
    name,
    mode: "overwrite",
    model,
    codec,
    makeEnv: clemTraining?.makeEnv ?? setup.makeEnv,
    makeEvalEnv: clemTraining?.makeEvalEnv,
    games: clemTraining?.games,
    corruptTurn: clemTraining?.corruptTurn,
    sftDocuments: clemTraining?.sftDocuments,
    diagnose: clemTraining?.diagnose ?? setup.diagnose,
    sourceTrajectories,
    config: c,
    baseModel: { source: source.label, dir: source.dir },
    progress: io.progress,
    log,
    dpoReferenceModel,
    ...(config.arpClem.batching === false ? { batching: false as const } : {}),
    onPhase: async (ev) => {
      const before = phaseClock(mark, markCpu).elapsed();
      const e = await evalWeights(ev.phase, model, codec);
      const label = PHASE_LABELS[ev.phase] ?? (ev.phase === "final" ? `s = ${c.scale} · ΣΔ, fp32 merge` : ev.phase);
      rows.push({ label, eval: ev, static: e.static, clem: e.clem, seconds: secondsSince(mark) });
      const from = memo.reused[ev.phase];
      // Where a phase's time goes (wall / process CPU): sizing the repro needs it, and CPU time holds on a loaded machine.
      log(
        from
          ? `[kiln arp] time ${ev.phase}: data + training + training-game eval ${before}; weights bit-identical to ${from}'s: its static score and clemscore+statscore reused`
          : `[kiln arp] time ${ev.phase}: data + training + training-game eval ${before}, static score ${e.seconds.static}, clemscore+statscore ${e.seconds.clem}`,
      );
      mark = performance.now();
      markCpu = process.cpuUsage();
    },
  });
  const specs = episodeSpecs(c.eval.episodes, c.eval.baseSeed, "eval");
  const evalVariant = async (label: string, prepare: (m: Model) => Promise<void>) => {
    const start = performance.now();
    const fresh = await source.load();
    await prepare(fresh.model);
    const policy = clemPolicy(`arp-${label}`, fresh.model, fresh.codec, config.arpClem.batching ?? true);
    const r = await evaluatePhase({
      phase: label,
      makeEnv: clemTraining?.makeEvalEnv ?? setup.makeEnv,
      policy,
      specs,
      params: { maxTokens: c.rollout.maxTokens, temperature: 0 },
      limits: { maxTurns: c.rollout.maxTurns },
      base: rows[0].eval,
    });
    const e = await evalWeights(label, fresh.model, fresh.codec);
    return { label, eval: r.eval, static: e.static, clem: e.clem, seconds: secondsSince(start), ...fresh };
  };
  return {
    rows,
    adapterDir: result.adapterDir,
    runDir: result.runDir,
    texts,
    textSource,
    details: {
      runDir: result.runDir,
      sftSize: result.sftSize,
      trainingGame: clemTraining ? "Wordle" : "guess-number",
      sftPerGame: result.sftPerGame,
      unrenderable: result.unrenderable,
      targeted: result.targeted,
      turnPairs: result.turnPairs,
      turnPairsByMode: result.turnPairsByMode,
      branchPairs: result.branchPairs,
      branch: result.branch,
      stages: result.stages,
      meanBf16DeltaLoss: result.meanBf16DeltaLoss,
    },
    reusedEvaluations: memo.reused,
    evalVariant,
  };
}

/** Wall and process CPU seconds since a moment (default: now), as "12.3 s wall / 20.1 s CPU". */
function phaseClock(wallStart = performance.now(), cpuStart = process.cpuUsage()) {
  return {
    elapsed(): string {
      const cpu = process.cpuUsage(cpuStart);
      return `${secondsSince(wallStart).toFixed(1)} s wall / ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s CPU`;
    },
  };
}

/** One line on what each stage trained on: A per game, A2's games, B1/B2 pairs per failure mode, C's pairs and ties. */
export function arpStageData(d: Record<string, unknown>): string {
  const r = d as unknown as ArpResult;
  const perGame = Object.entries(r.sftPerGame ?? {})
    .map(([env, n]) => `${env.replace(/^clembench\//, "")} ${n}`)
    .join(", ");
  const modes = (m: Record<string, number> | undefined) =>
    Object.entries(m ?? {})
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`)
      .join(", ") || "none";
  const byMode = r.turnPairsByMode;
  const parts = [
    `A ${r.sftSize} documents of successful episodes${perGame ? ` (${perGame})` : ""}`,
    r.targeted?.games.length
      ? `A2 ${r.targeted.size} episodes of the base's weakest games ${r.targeted.games.map((g) => g.replace(/^clembench\//, "")).join(", ")}`
      : "A2 skipped (no per-game probe)",
    `B1 ${r.turnPairs.b1} ${byMode?.synthetic ? "synthetic " : ""}pairs (${modes(byMode?.b1)})`,
    `B2 ${r.turnPairs.b2} ${byMode?.synthetic ? "synthetic " : ""}pairs (${modes(byMode?.b2)})`,
    `C ${r.branchPairs} branch pairs (minMargin ${r.branch?.minMargin}; ${r.branch?.ties} of ${r.branch?.candidates} candidate pairs dropped as ties)`,
  ];
  const left = Object.entries(r.unrenderable ?? {});
  if (left.length > 0)
    parts.push(
      `left out (tokenizer cannot render): ${left.map(([env, n]) => `${env.replace(/^clembench\//, "")} ${n}`).join(", ")}`,
    );
  return parts.join("; ");
}

/** The scaled delta (the run's adapter/, already × s) re-merged with total scale `s` in `dtype`. */
export function remerge(adapterDir: string, runScale: number, s: number, dtype: "f32" | "bf16") {
  if (runScale === 0) throw new ReproError("arp.scale is 0: the saved adapter holds no delta to re-scale");
  return async (model: Model): Promise<void> => {
    if (dtype === "bf16")
      // bf16 weights: the base is stored in bf16 and the merge rounds W₀ + s·ΣΔ to bf16.
      // (lm_head may be the tied embedding and is no LoRA target: it keeps its dtype.)
      for (const [name, lin] of model.namedLinears()) if (name !== "lm_head") lin.weight = lin.weight.to("bf16");
    const adapter = await loadAdapter(model, adapterDir, { name: "arp-delta" });
    mergeAdapter(adapter, { scale: s / runScale, dtype, keepOriginal: false });
  };
}

function staticNote(textSource: string, texts: number): string {
  return `Static score: mean negative log-likelihood per token on ${texts} held-out texts (${textSource}); lower is better, ppl = exp(NLL).`;
}

/**
 * The `dpo-reference` ablation: the same ARP run twice from the same base and seeds, the DPO
 * stages' reference being the previous stage's policy (runArp's default: the SFT model for B1)
 * or the untouched base W₀.
 */
async function reproDpoReference(source: ModelSource, config: ReproConfig, io: ReproIo): Promise<ReproResult> {
  const start = performance.now();
  const dir = join(io.out ?? "runs", "repro-arp-dpo-reference");
  const previous = await runArpWithStatic(source, config, dir, "reference-previous", io);
  const baseRef = (await source.load()).model;
  const base = await runArpWithStatic(source, config, dir, "reference-base", io, baseRef);
  const pick = (run: ArpRun, phase: string, label: string): ArpRow => {
    const row = run.rows.find((r) => r.eval.phase === phase);
    if (!row) throw new ReproError(`dpo-reference: the run has no ${phase} phase`);
    return { ...row, label };
  };
  const rows = [
    previous.rows[0],
    pick(previous, "branch-dpo", "reference = previous stage (SFT for B1): after C"),
    pick(previous, "final", `reference = previous stage: s = ${config.arp.scale} merge`),
    pick(base, "branch-dpo", "reference = base W₀: after C"),
    pick(base, "final", `reference = base W₀: s = ${config.arp.scale} merge`),
  ];
  const between = summarizeScores(rows[4].eval.scores, rows[2].eval.scores).delta;
  const seconds: Record<string, number> = {};
  for (const [arm, run] of [
    ["reference previous", previous],
    ["reference base", base],
  ] as const)
    seconds[arm] = run.rows.reduce((a, r) => a + r.seconds, 0);
  return {
    recipe: "arp",
    ablation: "dpo-reference",
    dir,
    tables: [
      arpTable(
        `Ablation: the DPO reference (ARP trained on ${previous.details.trainingGame}, seed ${config.seed})`,
        rows,
        [
          `Both arms start from the same base with the same seeds; only the DPO stages' reference differs. Δ (base-reference − previous-reference) of the merged models: ${fmtDelta(between)}.`,
          staticNote(previous.textSource, previous.texts.length),
        ],
      ),
    ],
    seconds,
    totalSeconds: secondsSince(start),
    details: { previous: previous.details, base: base.details },
    errors: [...previous.rows, ...base.rows].flatMap(rowErrors),
  };
}

/** A row's errored evaluation episodes (its training game's and its clembench episodes), named by the row. */
function rowErrors(row: ArpRow): ReproEpisodeError[] {
  return [...row.eval.errors, ...clemErrors(row.clem)].map((e) => ({ phase: row.label, ...e }));
}

/**
 * `kiln repro arp`: the phase table, with the bf16-merge row; `scale` adds the s sweep,
 * `dpo-reference` compares the DPO stages' reference models.
 */
export async function reproArp(
  source: ModelSource,
  config: ReproConfig,
  io: ReproIo & { ablation?: "scale" | "dpo-reference" } = {},
): Promise<ReproResult> {
  if (io.ablation === "dpo-reference") return reproDpoReference(source, config, io);
  return (await reproArpRows(source, config, { ...io, ablation: io.ablation })).result;
}

/** reproArp's table, with its rows (the two-seed table reads them). */
async function reproArpRows(
  source: ModelSource,
  config: ReproConfig,
  io: ReproIo & { ablation?: "scale" } = {},
): Promise<{ result: ReproResult; rows: ArpRow[] }> {
  const start = performance.now();
  const dir = io.dir ?? join(io.out ?? "runs", io.ablation ? `repro-arp-${io.ablation}` : "repro-arp");
  const run = await runArpWithStatic(source, config, dir, "arp", io);
  const c = config.arp;
  const bf16 = await run.evalVariant(
    `s = ${c.scale} · ΣΔ, bf16 merge`,
    remerge(run.adapterDir, c.scale, c.scale, "bf16"),
  );
  const rows = [...run.rows, bf16];
  const errors = rows.flatMap(rowErrors);
  const stageNote = `Stage data: ${arpStageData(run.details)}; a bf16 merge loses ${(100 * (run.details.meanBf16DeltaLoss as number)).toFixed(1)}% of the delta on average.`;
  const tables: ReproTable[] = [
    arpClemTable(
      `ARP judged by clemscore (seed ${config.seed}, base: ${source.label})`,
      rows,
      clemNotes(config, rows, run),
    ),
    arpGamesTable(`ARP per game (seed ${config.seed}): quality / % played on held-out instances`, rows),
    arpTable(`ARP on its training game, ${run.details.trainingGame} (seed ${config.seed})`, rows, [
      run.details.trainingGame === "Wordle"
        ? `Greedy episodes on Wordle's held-out instances (every fifth, never trained on; B1/B2/C train on Wordle); score = Main Score / 100, success = solved.`
        : `Greedy held-out guess-number episodes (seeds from ${c.eval.baseSeed}, never trained on); score = the episode's outcome score, success = solved.`,
      staticNote(run.textSource, run.texts.length),
      stageNote,
    ]),
  ];
  const seconds: Record<string, number> = {};
  for (const r of rows) seconds[r.label] = r.seconds;
  if (io.ablation === "scale") {
    const sweep: ArpRow[] = [run.rows[0]];
    for (const s of config.ablations.scales) {
      const row = await run.evalVariant(`s = ${s}`, remerge(run.adapterDir, c.scale, s, "f32"));
      sweep.push(row);
      errors.push(...rowErrors(row));
      seconds[`scale ${s}`] = row.seconds;
    }
    tables.push(
      arpTable("Ablation: delta scale s (the same ARP delta re-merged in fp32, no retraining)", sweep, [
        staticNote(run.textSource, run.texts.length),
      ]),
    );
  }
  const result: ReproResult = {
    recipe: "arp",
    ablation: io.ablation,
    dir,
    tables,
    seconds,
    totalSeconds: secondsSince(start),
    details: { ...run.details, seed: config.seed, rows: rows.map(rowDetails) },
    errors,
  };
  return { result, rows };
}

/** A row's numbers for summary.json: its training-game scores, static score, clem episodes and table rows. */
function rowDetails(r: ArpRow) {
  return {
    label: r.label,
    phase: r.eval.phase,
    scores: r.eval.scores,
    static: r.static,
    clem: r.clem.clem,
    stat: r.clem.stat,
    clemEpisodes: r.clem.episodes,
    staticEpisodes: r.clem.staticEpisodes,
  };
}

/** What the clemscore table's numbers are, under it. */
function clemNotes(config: ReproConfig, rows: readonly ArpRow[], run: ArpRun): string[] {
  const k = config.arpClem;
  const labelOf = (phase: string) => rows.find((r) => r.eval.phase === phase)?.label.trim() ?? phase;
  const reused = Object.entries(run.reusedEvaluations).map(
    ([phase, from]) =>
      `${labelOf(phase)}: weights bit-identical to ${labelOf(from)}'s (its stage changed nothing), so its static score, clemscore and statscore are that row's evaluation, not a second run of the same greedy episodes.`,
  );
  const episodes = rows[0]?.clem.episodes ?? [];
  const stopped = rows.flatMap((r) => [...r.clem.episodes, ...r.clem.staticEpisodes]).filter((e) => e.stopped).length;
  const caps = Object.entries(k.turnCaps ?? {})
    .map(([game, n]) => `; ${game} at most ${n}`)
    .join("");
  return [
    `Seed card column: ${ARP_SEED_SOURCE}; the seed's D row is its s = 0.85 merge, it has no bf16 row. kiln's rows are its own embedded model and miniature training, not the seed's 7-8B models: compare the shape, not the level.`,
    `clemscore: clembench's clemeval as kiln ports it (clemTable over the episodes' Aborted / Main Score) on ${episodes.length} held-out episodes (${k.instancesPerGame || "all"} per game, spread over each game's held-out list: every fifth instance, never trained on) of ${k.games.join(", ")}; greedy, the agent in role 0 from the view its corpus was written in, the other roles the corpus's scripted partners, ${k.maxTokens} tokens per reply. A reply that calls a tool, or an episode past its game's turn limit (at most ${k.maxTurns}${caps}), counts as aborted (${stopped} such episodes over all rows).`,
    ...reused,
    `Δ clemscore ± SE: the difference of the two clemscores; SE by pairing each episode's linearised contribution to the clemscore with the base's on the same episode and summing the per-game variances (docs/NUMERICS.md §9.1). The seed's claimed effects (A; the final merge) are checked as Δ > 2 SE.`,
    `statscore: the same formula over ${k.staticInstances || "all"} held-out instances each of ${k.staticGames.join(", ") || "no static benchmark"} (kiln ships no IFEval, CLadder or MMLU-Pro data, so those are not in it); NLL/token: ${run.texts.length} held-out texts (${run.textSource}), lower is better. "statscore preserved" reads as Δ statscore ≈ 0 and Δ NLL ≈ 0.`,
  ];
}

/**
 * `kiln repro arp --seeds 42,43`: the whole ARP table once per seed (each in <dir>/seed-N/), then one table
 * with every seed's clemscore and Δ per phase and whether the seed's claimed effects exceed 2 SE in each.
 */
export async function reproArpSeeds(
  source: ModelSource,
  configs: readonly ReproConfig[],
  io: ReproIo = {},
): Promise<ReproResult> {
  if (configs.length === 0) throw new ReproError("repro arp: no seeds given");
  const start = performance.now();
  const dir = io.dir ?? join(io.out ?? "runs", "repro-arp");
  const results: ReproResult[] = [];
  const runs: { seed: number; rows: ArpRow[] }[] = [];
  for (const config of configs) {
    const { result, rows } = await reproArpRows(source, config, { ...io, dir: join(dir, `seed-${config.seed}`) });
    results.push(result);
    runs.push({ seed: config.seed, rows });
  }
  const seconds: Record<string, number> = {};
  for (const r of results) seconds[`seed ${(r.details as { seed: number }).seed}`] = r.totalSeconds;
  return {
    recipe: "arp",
    dir,
    tables: [arpSeedsTable(runs), ...results.flatMap((r) => r.tables)],
    seconds,
    totalSeconds: secondsSince(start),
    details: Object.fromEntries(results.map((r) => [`seed-${(r.details as { seed: number }).seed}`, r.details])),
    errors: results.flatMap((r) => r.errors ?? []),
  };
}
