// The OPD table: base → r1 → r2 → r3 (on-policy distillation rounds, a fresh LoRA per round on the
// merged previous round), each with its score ± SE on held-out instances and the paired Δ against
// the base; the teacher's own score beside them (teacher = the student with a scaffold note in its
// system prompt, scaffoldedTeacher); the per-stage wall table when the setup reports one
// (questworld's Core-3). The ablations `early-turn-weight` and `clamp` rerun the rounds per arm.
import { join } from "node:path";
import { GuessNumberEnv, type Policy, episodeSpecs, isSuccessful, meanSe, pairedDelta } from "@kiln/rollout";
import { LocalPolicy } from "@kiln/models";
import { noteGuidedTeacher } from "../agent-model/questworld-privileged.js";
import { GUESS_NUMBER_MAX_TURNS } from "../agent-model/corpus.js";
import { GUESS_NUMBER_LESSON } from "../agent-model/notes.js";
import { assertSameTokenizer, scaffoldedTeacher } from "../recipes/opd-samples.js";
import { type OpdEvaluation, type OpdRoundDiagnostics, runOpdRounds } from "../recipes/opd.js";
import type { OpdConfig } from "../recipes/presets.js";
import { type PhaseEval, evaluatePhase, phaseFromScores } from "../recipes/recipe-run.js";
import type { ReproIo } from "./arp-repro.js";
import { OPD_TEACHERS, type ReproConfig } from "./config.js";
import { ReproError } from "./errors.js";
import type { ModelSource } from "./model-source.js";
import { questworldPrivilegedTeacherSource, questworldSftTeacherSource, sftTeacherSource } from "./opd-teacher.js";
import type { OpdReproSetup } from "./opd-setup.js";
import { questworldReproSetup } from "./questworld-setup.js";
import { type ReproEpisodeError, type ReproResult, secondsSince } from "./output.js";
import { type ReproTable, beyondSe, fmt, fmtDelta, scoreBar } from "./table.js";

export type { OpdReproSetup } from "./opd-setup.js";

/** Guess-number OPD: greedy held-out episodes, the bisection lesson as the teacher's scaffold. */
export function guessNumberOpdSetup(config: ReproConfig): OpdReproSetup {
  const makeEnv = () => new GuessNumberEnv();
  const specs = episodeSpecs(config.heldout.opdEpisodes, config.heldout.opdBaseSeed, "heldout");
  return {
    name: "guess-number",
    makeEnv,
    note: GUESS_NUMBER_LESSON,
    limits: { maxTurns: GUESS_NUMBER_MAX_TURNS },
    async evaluate(policy) {
      const r = await evaluatePhase({
        phase: "eval",
        makeEnv,
        policy,
        specs,
        params: { maxTokens: config.opd.rollout.maxTokens, temperature: 0 },
        limits: { maxTurns: GUESS_NUMBER_MAX_TURNS },
      });
      return {
        scores: r.eval.scores,
        success: Object.fromEntries(r.trajectories.map((t) => [t.episodeId, isSuccessful(t) ? 1 : 0])),
        errors: r.eval.errors,
      };
    },
  };
}

export interface OpdArm {
  phases: PhaseEval[];
  teacher: PhaseEval;
  wallTables: Record<string, (string | number)[][]>;
  /** Per phase (and "teacher"): which evaluated episodes passed the setup's wall. */
  walls: Record<string, NonNullable<OpdEvaluation["wall"]>>;
  diagnostics: OpdRoundDiagnostics[];
  seconds: Record<string, number>;
  runDir: string;
  samples: number[];
}

/**
 * The numbers `acrossSeedsTable` compares between seeds: each phase's (and the teacher's) mean score — Core-3 on
 * questworld — and, where the setup has a wall, the share of evaluated episodes past it.
 */
export function opdSeedSummary(arm: OpdArm): Record<string, Record<string, number>> {
  const summary: Record<string, Record<string, number>> = {};
  for (const p of [...arm.phases, arm.teacher]) {
    const row: Record<string, number> = { score: p.score.mean };
    const wall = arm.walls[p.phase];
    if (wall) row["past the wall"] = meanSe(Object.values(wall.passed)).mean;
    summary[p.phase] = row;
  }
  return summary;
}

/** The rounds from a fresh copy of the base, with the teacher evaluated beside the base. */
export async function runOpdArm(
  source: ModelSource,
  opd: OpdConfig,
  setup: OpdReproSetup,
  dir: string,
  name: string,
  io: ReproIo,
  /** A separate teacher model (same tokenizer); default: the student with the setup's scaffold note. */
  teacherSource?: ModelSource,
  /** The teacher sees the setup's privileged information (setup.privileged) at play and when it scores. */
  privileged = false,
  /** Wraps the teacher model's policy (the note-guided teacher: noteGuidedTeacher). */
  wrapTeacher?: (teacher: LocalPolicy) => Policy,
  /**
   * Each round's teacher is `wrapTeacher` of the student as that round's rollouts found it (the merged
   * previous round) instead of the teacher model; the teacher's row still evaluates the teacher model.
   */
  wrapStudent = false,
): Promise<OpdArm> {
  if (wrapStudent && !wrapTeacher) throw new ReproError("a teacher built on the student needs wrapTeacher");
  const priv = privileged ? setup.privileged : undefined;
  if (privileged && !priv) throw new ReproError(`${setup.name} has no privileged teacher`);
  if (priv && !teacherSource) throw new ReproError("a privileged teacher needs a teacher model (teacherSource)");
  const { model, codec } = await source.load();
  let teacherModel: Policy | undefined;
  const seconds: Record<string, number> = {};
  if (teacherSource) {
    const t0 = performance.now();
    const t = await teacherSource.load();
    seconds["teacher (load or train)"] = secondsSince(t0);
    assertSameTokenizer(codec.tokenizer, t.codec.tokenizer, `teacher ${teacherSource.label}`);
    const local = new LocalPolicy({
      id: `teacher:${teacherSource.label}`,
      model: t.model,
      tokenizer: t.codec.tokenizer,
      chatTemplate: t.codec.template,
    });
    teacherModel = wrapTeacher ? wrapTeacher(local) : local;
  }
  const config = structuredClone(opd);
  if (setup.limits?.maxTurns !== undefined) config.rollout.maxTurns = setup.limits.maxTurns;
  if (config.objective.clamp === 0) config.objective.clamp = Number.POSITIVE_INFINITY;
  const wallTables: Record<string, (string | number)[][]> = {};
  const walls: OpdArm["walls"] = {};
  let teacher: PhaseEval | undefined;
  let mark = performance.now();
  const r = await runOpdRounds({
    out: dir,
    name,
    mode: "overwrite",
    model,
    codec,
    makeEnv: setup.makeEnv,
    teacher: (student) =>
      wrapStudent && wrapTeacher
        ? wrapTeacher(student as LocalPolicy)
        : (teacherModel ?? scaffoldedTeacher(student, setup.note)),
    teacherPrompt: priv?.teacherPrompt,
    starts: setup.starts,
    view: setup.view,
    focusTurn: setup.focusTurn,
    turnsPerRound: setup.turnsPerRound,
    config,
    baseModel: { source: source.label, dir: source.dir },
    progress: io.progress,
    log: io.log,
    evaluate: async (policy, round) => {
      const phase = round === 0 ? "base" : `r${round}`;
      const e = await setup.evaluate(policy);
      if (e.table) wallTables[phase] = e.table;
      if (e.wall) walls[phase] = e.wall;
      seconds[phase] = secondsSince(mark);
      if (round === 0) {
        // The teacher at the base: the same weights with the scaffold note in the system prompt.
        const t0 = performance.now();
        const t =
          priv && teacherModel
            ? await priv.evaluateTeacher(teacherModel)
            : await setup.evaluate(teacherModel ?? scaffoldedTeacher(policy, setup.note));
        teacher = phaseFromScores("teacher", t.scores, {
          success: t.success,
          errors: t.errors,
          base: phaseFromScores("base", e.scores),
        });
        if (t.table) wallTables.teacher = t.table;
        if (t.wall) walls.teacher = t.wall;
        seconds["teacher eval"] = secondsSince(t0);
      }
      mark = performance.now();
      return e;
    },
  });
  // Rounds in order, the teacher last (it was evaluated beside the base).
  const ordered = Object.fromEntries(
    [...Object.keys(wallTables).filter((k) => k !== "teacher"), "teacher"]
      .filter((k) => wallTables[k])
      .map((k) => [k, wallTables[k]]),
  );
  return {
    phases: [r.baseline, ...r.rounds.map((x) => x.eval)],
    teacher: teacher as PhaseEval,
    wallTables: ordered,
    walls,
    diagnostics: r.rounds.map((x) => x.diagnostics),
    seconds,
    runDir: r.runDir,
    samples: r.rounds.map((x) => x.samples),
  };
}

function phaseRow(label: string, p: PhaseEval, isBase: boolean, success: boolean): string[] {
  return [
    label,
    String(p.n),
    fmt(p.score),
    ...(success ? [fmt(p.success)] : []),
    isBase ? "—" : fmtDelta(p.delta),
    String(p.errors.length),
  ];
}

/**
 * The wall tables side by side: one row per stage, "passed/of" per phase. Tables in another shape
 * (not `#, stage, passed, of, …`) are listed as they are.
 */
export function combinedWallTable(tables: Record<string, (string | number)[][]>): ReproTable[] {
  const phases = Object.keys(tables);
  if (phases.length === 0) return [];
  const shaped = phases.every((p) => String(tables[p][0]?.[2]) === "passed" && String(tables[p][0]?.[3]) === "of");
  if (!shaped)
    return phases.map((p) => ({
      title: `Wall table after ${p}`,
      header: tables[p][0].map(String),
      rows: tables[p].slice(1).map((r) => r.map(String)),
    }));
  const first = tables[phases[0]];
  return [
    {
      title: "Per-stage wall table (episodes that passed each stage / episodes)",
      header: [String(first[0][0]), String(first[0][1]), ...phases],
      rows: first.slice(1).map((row, i) => [
        String(row[0]),
        String(row[1]),
        ...phases.map((p) => {
          const r = tables[p][i + 1];
          return r ? `${r[2]}/${r[3]}` : "—";
        }),
      ]),
    },
  ];
}

export function opdTable(
  title: string,
  arm: OpdArm,
  notes: string[] = [],
  success = true,
  teacherLabel = "teacher (base + scaffold note)",
): ReproTable {
  return {
    title,
    header: ["phase", "n", "score ± SE", ...(success ? ["success ± SE"] : []), "Δ score vs base ± SE", "errors"],
    rows: [
      ...arm.phases.map((p, i) => phaseRow(p.phase, p, i === 0, success)),
      phaseRow(teacherLabel, arm.teacher, false, success),
    ],
    notes,
    chart: {
      xLabel: "score per held-out episode, mean ± SE",
      bars: [
        ...arm.phases.map((p, i) => scoreBar(p.phase, p.score, p.n, i === 0 ? undefined : p.delta)),
        scoreBar(teacherLabel, arm.teacher.score, arm.teacher.n, arm.teacher.delta),
      ],
    },
  };
}

/**
 * The wall row of the seed card beside kiln's: per phase, the episodes that passed the wall, their
 * share ± SE and the paired Δ against the base over the same episodes. Where the seed claims the
 * wall falls (`seedWall.claims`), the last column says whether kiln's Δ is over 2 SE.
 */
export function wallPassTable(arm: OpdArm, seedWall?: OpdReproSetup["seedWall"]): ReproTable | undefined {
  const base = arm.walls.base;
  if (!base) return undefined;
  const phases = [...arm.phases.map((p) => p.phase), "teacher"].filter((p) => arm.walls[p]);
  const rows = phases.map((phase) => {
    const w = arm.walls[phase];
    const values = Object.values(w.passed);
    const passed = values.filter((v) => v > 0).length;
    const share = meanSe(values);
    const isBase = phase === "base";
    const delta = isBase ? undefined : pairedDelta(w.passed, base.passed);
    const claimed = seedWall?.claims.includes(phase) ?? false;
    const verdict = !claimed
      ? "—"
      : delta && delta.mean > 0 && beyondSe(delta)
        ? "holds (Δ > 2 SE)"
        : "does not hold here";
    return [
      phase,
      ...(seedWall ? [seedWall.byPhase[phase] ?? "—"] : []),
      `${passed}/${values.length}`,
      fmt(share),
      isBase ? "—" : fmtDelta(delta),
      ...(seedWall ? [verdict] : []),
    ];
  });
  return {
    title: `The wall: "${base.label}" — episodes past it per phase${seedWall ? `, the seed's row beside kiln's` : ""}`,
    header: [
      "phase",
      ...(seedWall ? [`seed (${seedWall.source})`] : []),
      "kiln: passed / episodes",
      "kiln: share ± SE",
      "Δ share vs base ± SE",
      ...(seedWall ? ["seed's claim here"] : []),
    ],
    rows,
    notes: [
      "An episode passes the wall when its agent hands in the moonpetals within the turn budget; Δ is paired over the same (seed, archetype) episodes.",
      ...(seedWall
        ? [`The seed's column is its published wall row (${seedWall.source}); it evaluated 3 agents per phase.`]
        : []),
    ],
  };
}

function fmtNumber(x: number, digits = 3): string {
  return Number.isFinite(x) ? x.toFixed(digits) : "—";
}

/**
 * What the seed's sampled-token objective sees each round: the advantage A = log p_teacher − log q
 * on every trained token and on the focus turns (questworld: at the wall) — its mean, the share
 * with A > 0 (pushed up), the share cut by the clamp — the PPO ratio's clip fraction and the
 * rollouts per start state.
 */
export function opdDiagnosticsTable(arm: OpdArm, clamp: number, focusLabel = "focus turns"): ReproTable | undefined {
  if (arm.diagnostics.length === 0) return undefined;
  const hasFocus = arm.diagnostics.some((d) => d.advantage.focus);
  const stats = (a: OpdRoundDiagnostics["advantage"]["all"] | undefined) =>
    a
      ? [String(a.turns), fmtNumber(a.mean), fmtNumber(a.positive), fmtNumber(a.meanAbs), fmtNumber(a.clamped)]
      : ["—", "—", "—", "—", "—"];
  const cols = (what: string) => [
    `${what}: turns`,
    `${what}: mean A`,
    `${what}: share A > 0`,
    `${what}: mean |A|`,
    `${what}: share |A| > ${clamp}`,
  ];
  return {
    title: "The seed's objective on each round's samples (A = log p_teacher − log q of the sampled token)",
    header: [
      "round",
      ...cols("all"),
      ...(hasFocus ? cols(focusLabel) : []),
      "PPO clip fraction",
      "rollouts per start state",
    ],
    rows: arm.diagnostics.map((d, i) => [
      `r${i + 1}`,
      ...stats(d.advantage.all),
      ...(hasFocus ? stats(d.advantage.focus) : []),
      fmtNumber(d.clipFraction),
      fmtNumber(d.samplesPerState, 2),
    ]),
    notes: [
      "Rollouts are the previous round's policy at temperature 1. A < 0 on a token means the teacher likes it less than the student did; the update pushes it down and the mass goes to tokens that were not sampled.",
    ],
  };
}

/** The phases' errored evaluation episodes, named by phase (with the arm's label in an ablation). */
function phaseErrors(phases: readonly PhaseEval[], prefix = ""): ReproEpisodeError[] {
  return phases.flatMap((p) => p.errors.map((e) => ({ phase: `${prefix}${p.phase}`, ...e })));
}

/** `kiln repro opd`, or one of its ablations (`early-turn-weight`, `clamp`). */
export async function reproOpd(
  source: ModelSource,
  config: ReproConfig,
  io: ReproIo & {
    ablation?: "early-turn-weight" | "clamp" | "objective";
    setup?: OpdReproSetup;
    teacher?: ModelSource;
  } = {},
): Promise<ReproResult> {
  const start = performance.now();
  if (config.opdEnv !== "questworld" && config.opdEnv !== "guess-number")
    throw new ReproError(`opdEnv must be "questworld" or "guess-number", got "${config.opdEnv}"`);
  const setup =
    io.setup ?? (config.opdEnv === "questworld" ? questworldReproSetup(config) : guessNumberOpdSetup(config));
  const dir = io.dir ?? join(io.out ?? "runs", io.ablation ? `repro-opd-${io.ablation}` : "repro-opd");
  if (!(OPD_TEACHERS as readonly string[]).includes(config.opdTeacher))
    throw new ReproError(`opdTeacher must be one of ${OPD_TEACHERS.join(", ")}, got "${config.opdTeacher}"`);
  // "privileged" (questworld): the base taught in the run to act on the expert planner's
  // note, scoring the student's tokens with the note for the student's own state. "guided": the
  // base itself, its tokens tilted towards the note's call (GuidedPolicy), nothing trained.
  const guided = config.opdTeacher === "guided" && !io.teacher;
  const privileged = (config.opdTeacher === "privileged" || guided) && !io.teacher;
  if (privileged && (config.opdEnv !== "questworld" || !setup.privileged))
    throw new ReproError(
      `opdTeacher "${config.opdTeacher}" has no privileged information for ${setup.name}; use opdTeacher=sft, opdTeacher=scaffold or --teacher DIR`,
    );
  const guidance = config.opdQuestworld.guidance;
  if (guided && !(typeof guidance === "number" && Number.isFinite(guidance) && guidance > 0))
    throw new ReproError(`opdQuestworld.guidance must be a positive number of nats, got ${JSON.stringify(guidance)}`);
  const wrapTeacher = guided ? (p: LocalPolicy) => noteGuidedTeacher(p, guidance) : undefined;
  const guideFrom = config.opdQuestworld.guideFrom;
  if (guideFrom !== "base" && guideFrom !== "student")
    throw new ReproError(`opdQuestworld.guideFrom must be "base" or "student", got ${JSON.stringify(guideFrom)}`);
  const wrapStudent = guided && guideFrom === "student";
  // "sft": a teacher trained in the run — ARP's phase A on guess-number, the expert's wall turns on questworld.
  const sftTeacher = () =>
    config.opdEnv === "questworld" && !io.setup
      ? questworldSftTeacherSource(source, config, io)
      : setup.name === "guess-number"
        ? sftTeacherSource(source, config, io)
        : undefined;
  const trained = guided
    ? { label: `base + ${guidance} nats towards the expert's next call`, dir: source.dir, load: () => source.load() }
    : privileged
      ? questworldPrivilegedTeacherSource(source, config, io)
      : config.opdTeacher === "sft" && !io.teacher
        ? sftTeacher()
        : undefined;
  if (config.opdTeacher === "sft" && !io.teacher && !trained)
    throw new ReproError(
      `opdTeacher "sft" has no trained teacher for ${setup.name}; use opdTeacher=scaffold or --teacher DIR`,
    );
  const teacherSource = io.teacher ?? trained;
  const teacherLabel = teacherSource
    ? `teacher (${
        io.teacher
          ? io.teacher.label
          : guided
            ? `base guided ${guidance} nats towards the expert's next call`
            : privileged
              ? "base + SFT to act on the expert's note, with the note"
              : config.opdEnv === "questworld"
                ? "base + SFT on expert wall turns"
                : "base + ARP phase A"
      })`
    : undefined;
  const objective = config.opd.objective;
  const notes = [
    guided && teacherSource
      ? `Held-out ${setup.name} instances, greedy; the teacher is the base (a separate copy of its weights) with a bonus of ${guidance} nats on every token that continues the expert planner's next call for the state it plays or scores (the student never sees the call): p_T ∝ p_base · e^{${guidance}·[token continues the call]}, so its row is what the rounds distil towards.`
      : privileged && teacherSource
        ? `Held-out ${setup.name} instances, greedy; the teacher is ${teacherSource.label} (same tokenizer), playing and scoring with the expert planner's next call for the state in its prompt (the student never sees it), so its row is what the rounds distil towards.`
        : teacherSource
          ? `Held-out ${setup.name} instances, greedy; the teacher is ${teacherSource.label} (same tokenizer), so its row is what the rounds distil towards.`
          : `Held-out ${setup.name} instances, greedy; the teacher is the same base weights with the note "${setup.note}" in the system prompt, so its row is what the rounds distil towards.`,
    objective.divergence === "sampled"
      ? `Objective: the sampled-token advantage −(log q − log p_teacher), clamp ${objective.clamp}, ${objective.objective}, early-turn weight ${objective.earlyTurnWeight}.`
      : `Objective: ${objective.divergence === "reverse_kl" ? "reverse" : "forward"} KL to the teacher's top-${objective.teacherTopK} distribution (plus a tail bucket) at every sampled position, early-turn weight ${objective.earlyTurnWeight}.`,
  ];
  if (!io.ablation) {
    const arm = await runOpdArm(
      source,
      config.opd,
      setup,
      dir,
      "opd",
      io,
      teacherSource,
      privileged,
      wrapTeacher,
      wrapStudent,
    );
    const wall = wallPassTable(arm, setup.seedWall);
    const diagnostics = opdDiagnosticsTable(arm, objective.clamp, setup.focusLabel);
    return {
      recipe: "opd",
      dir,
      tables: [
        opdTable(
          `OPD rounds on ${setup.name} (seed ${config.seed}, base: ${source.label})`,
          arm,
          [...notes, `Teacher-scored turns per round: ${arm.samples.join(", ")}.`],
          setup.reportsSuccess !== false,
          teacherLabel,
        ),
        ...(wall ? [wall] : []),
        ...combinedWallTable(arm.wallTables),
        ...(diagnostics ? [diagnostics] : []),
      ],
      seconds: arm.seconds,
      totalSeconds: secondsSince(start),
      details: { runDir: arm.runDir, phases: arm.phases, teacher: arm.teacher, samples: arm.samples },
      errors: phaseErrors(arm.phases),
      seedSummary: opdSeedSummary(arm),
    };
  }
  const arms: { label: string; key: string; value: number | string }[] =
    io.ablation === "clamp"
      ? config.ablations.clamps.map((c) => ({ label: c === 0 ? "clamp none" : `clamp ${c}`, key: "clamp", value: c }))
      : io.ablation === "objective"
        ? [
            { label: "sampled-token advantage (the seed's)", key: "divergence", value: "sampled" },
            {
              label: `top-${config.opd.objective.teacherTopK} reverse KL (kiln's variant)`,
              key: "divergence",
              value: "reverse_kl",
            },
            // Mass-covering: raises the teacher's token by the teacher's probability whatever the student
            // gives it, where the two mode-seeking arms scale with the student's own (docs/NUMERICS.md §4.4).
            {
              label: `top-${config.opd.objective.teacherTopK} forward KL (kiln's variant, mass-covering)`,
              key: "divergence",
              value: "forward_kl",
            },
          ]
        : config.ablations.earlyTurnWeights.map((w) => ({
            label: `early-turn weight ${w}`,
            key: "earlyTurnWeight",
            value: w,
          }));
  const tables: ReproTable[] = [];
  const seconds: Record<string, number> = {};
  const finals: { label: string; final: PhaseEval; base: PhaseEval }[] = [];
  const errors: ReproEpisodeError[] = [];
  for (const a of arms) {
    const opd = structuredClone(config.opd);
    (opd.objective as unknown as Record<string, number | string>)[a.key] = a.value;
    // The clamp bounds the sampled-token advantage: that ablation runs the seed's objective.
    if (io.ablation === "clamp") opd.objective.divergence = "sampled";
    const arm = await runOpdArm(
      source,
      opd,
      setup,
      dir,
      a.label.replace(/\s+/g, "-"),
      io,
      teacherSource,
      privileged,
      wrapTeacher,
      wrapStudent,
    );
    for (const [k, v] of Object.entries(arm.seconds)) seconds[`${a.label}: ${k}`] = v;
    finals.push({ label: a.label, final: arm.phases[arm.phases.length - 1], base: arm.phases[0] });
    errors.push(...phaseErrors(arm.phases, `${a.label}: `));
  }
  const ref = finals[0];
  tables.push({
    title: `Ablation: OPD ${io.ablation} (${setup.name}, ${config.opd.rounds} rounds, seed ${config.seed})`,
    header: ["arm", "n", "base ± SE", "final ± SE", "Δ vs base ± SE", `Δ vs ${ref.label} ± SE`],
    rows: finals.map((f) => [
      f.label,
      String(f.final.n),
      fmt(f.base.score),
      fmt(f.final.score),
      fmtDelta(f.final.delta),
      f === ref ? "—" : fmtDelta(phaseFromScores(f.label, f.final.scores, { base: ref.final }).delta),
    ]),
    chart: {
      xLabel: "final score per held-out episode, mean ± SE (Δ: against each arm's base)",
      bars: finals.map((f) => scoreBar(f.label, f.final.score, f.final.n, f.final.delta)),
    },
    notes: [
      ...(io.ablation === "clamp"
        ? [notes[0], "Objective: the seed's sampled-token advantage (what the clamp bounds), PPO-clipped."]
        : notes),
      "Every arm starts from the same base with the same seeds; only the named setting differs.",
    ],
  });
  return {
    recipe: "opd",
    ablation: io.ablation,
    dir,
    tables,
    seconds,
    totalSeconds: secondsSince(start),
    details: { finals },
    errors,
  };
}
