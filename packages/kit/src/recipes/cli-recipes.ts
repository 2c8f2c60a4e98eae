// `kiln arp|opd|oel`: the recipes with typed configurations. `--preset seed` is the seed systems'
// card, `--preset tiny` (default) the same stages sized for a CPU; `--config FILE` overlays a JSON
// file and `--set path=value[;path=value…]` single fields; `--print-config` prints the effective
// configuration and exits. Without --model the student is the embedded tiny chat model (a random
// 2-layer Qwen3 with a character tokenizer): a pipeline check, not a benchmark.
import { readFileSync } from "node:fs";
import { clembench, questworld, tau2 } from "@kiln/benchmarks";
import { ChatTemplate, LocalPolicy, type Model, type Tokenizer, loadModel, loadTokenizer } from "@kiln/models";
import {
  type EpisodeSpec,
  type Environment,
  GuessNumberEnv,
  HttpPolicy,
  type Policy,
  ScriptedPolicy,
  guessNumberScript,
} from "@kiln/rollout";
import { type BackendName, disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { type ParsedArgs, UsageError, intFlag, strFlag } from "../cli-main.js";
import type { RunMode } from "../run-dir.js";
import { acquireExpertEpisodes, runArp } from "./arp.js";
import type { ChatCodec } from "./batches.js";
import type { DiagnoseOptions } from "./diagnose.js";
import { runOel } from "./oel.js";
import { Tau2TasksEnvironment, experienceMemory } from "./oel-tau2.js";
import { scaffoldedTeacher } from "./opd-samples.js";
import type { OpdEvaluation } from "./opd.js";
import { runOpdRounds } from "./opd.js";
import {
  type ArpConfig,
  type OelConfig,
  type OpdConfig,
  type RecipeConfig,
  UNSTATED_SEED_FIELDS,
  applyConfigObject,
  checkBaseDtype,
  presetConfig,
  setConfigValue,
} from "./presets.js";
import { tinyChat } from "./tiny-chat.js";

async function loadStudent(
  dir: string | undefined,
  seed: number,
  baseDtype = "f32",
): Promise<{ model: Model; codec: ChatCodec; source: string }> {
  const dtype = checkBaseDtype(baseDtype);
  if (!dir) {
    const t = tinyChat({ seed, std: 0.2 });
    return {
      model: t.model,
      codec: { tokenizer: t.tokenizer, template: t.chatTemplate },
      source: `kiln tinyChat (random 2-layer Qwen3, character tokenizer, seed ${seed})`,
    };
  }
  const tokenizer = await loadTokenizer(dir);
  return {
    // bf16: the frozen base keeps its stored precision (half of f32's memory); the adapter trains in f32.
    model: await loadModel(dir, { dtype }),
    codec: { tokenizer, template: ChatTemplate.fromTokenizer(tokenizer) },
    source: dir,
  };
}

function stable(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );
}

/** The teacher scores the student's token ids, so both must tokenize identically. */
export function assertSameTokenizer(student: Tokenizer, teacher: Tokenizer, label: string): void {
  const key = (t: Tokenizer) =>
    stable({ model: (t.tokenizerJson as { model?: unknown }).model, added: t.tokenizerJson.added_tokens });
  if (key(student) !== key(teacher))
    throw new UsageError(
      `${label}: its tokenizer differs from the student's (vocabulary, merges or added tokens); OPD scores the student's token ids, so the teacher must share the tokenizer`,
    );
}

/** The effective configuration: preset, then --config file, then --set fields, then --seed. */
export function effectiveConfig(command: "arp" | "opd" | "oel", flags: ParsedArgs["flags"]): RecipeConfig {
  let config: RecipeConfig;
  try {
    config = presetConfig(command, strFlag(flags, "preset", "tiny")!);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const file = strFlag(flags, "config");
  if (file) {
    let overlay: unknown;
    try {
      overlay = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      throw new UsageError(`--config ${file}: ${(e as Error).message}`);
    }
    try {
      applyConfigObject(config, overlay as Record<string, unknown>);
    } catch (e) {
      throw new UsageError(`--config ${file}: ${(e as Error).message}`);
    }
  }
  const sets = strFlag(flags, "set");
  if (sets)
    for (const part of sets.split(";").filter((s) => s.trim())) {
      const eq = part.indexOf("=");
      if (eq <= 0) throw new UsageError(`--set needs path=value, got "${part}"`);
      try {
        setConfigValue(config, part.slice(0, eq).trim(), part.slice(eq + 1).trim());
      } catch (e) {
        throw new UsageError(`--set ${part}: ${(e as Error).message}`);
      }
    }
  if (flags.seed !== undefined) config.seed = intFlag(flags, "seed", config.seed);
  return config;
}

/** Environments `kiln arp` trains on: rollout's guess-number, or a clembench Wordle game. */
export const ARP_ENVS = ["guess-number", "wordle", "wordle_withclue"];

interface ArpEnvironmentSetup {
  makeEnv: () => Environment;
  makeEvalEnv?: () => Environment;
  /** The acquired episodes' player (the SFT source and the turn-local references). */
  expert: Policy;
  expertTurns: number;
  diagnose?: Omit<DiagnoseOptions, "maxChars">;
}

export function arpEnvironment(env: string): ArpEnvironmentSetup {
  if (env === "guess-number")
    return {
      makeEnv: () => new GuessNumberEnv(),
      // A bisecting expert that sometimes emits a malformed call.
      expert: new ScriptedPolicy({ id: "bisect-expert", script: guessNumberScript({ malformedRate: 0.1 }) }),
      expertTurns: 8,
    };
  // Wordle through its game master: every fifth instance is held out for evaluation.
  const file = clembench.loadInstances(clembench.getGame(env).dataPath ?? env);
  const words = (file.experiments[0].lang_keywords as { official_words_list: string[] }).official_words_list;
  const known = new Set(words.map((w) => w.toLowerCase()));
  const guessOf = (m: { content?: string | null }) => /guess:\s*(\S+)/i.exec(m.content ?? "")?.[1]?.toLowerCase();
  return {
    makeEnv: () => new clembench.ClemGameEnvironment({ game: env, pick: (i) => i % 5 !== 0 }),
    makeEvalEnv: () => new clembench.ClemGameEnvironment({ game: env, pick: (i) => i % 5 === 0 }),
    expert: clembench.policyFromBackend(clembench.wordleSolver(words), "wordle-solver"),
    expertTurns: 8,
    diagnose: {
      // The seed's Wordle failure modes: a guess that is not five letters, a word not in the list.
      wrongLength: (m) => {
        const g = guessOf(m);
        return g !== undefined && g.length !== 5;
      },
      invalidMove: (m) => {
        const g = guessOf(m);
        return g === undefined || (g.length === 5 && !known.has(g));
      },
    },
  };
}

function runMode(flags: ParsedArgs["flags"]): RunMode {
  if (flags.resume && flags.overwrite) throw new UsageError("--resume and --overwrite exclude each other");
  return flags.resume ? "resume" : flags.overwrite ? "overwrite" : "new";
}

export async function runRecipeCommand(command: "arp" | "opd" | "oel", args: ParsedArgs): Promise<number> {
  const f = args.flags;
  const config = effectiveConfig(command, f);
  if (f["print-config"]) {
    console.log(JSON.stringify(config, null, 2));
    if (strFlag(f, "preset", "tiny") === "seed")
      console.error(
        `kiln ${command}: fields the seed card does not state (kiln defaults): ${UNSTATED_SEED_FIELDS[command].join(", ")}`,
      );
    return 0;
  }
  const backend = strFlag(f, "backend", "wasm") as BackendName;
  if (backend !== "wasm" && backend !== "js") throw new UsageError(`--backend must be wasm or js, got ${backend}`);
  const io = { out: strFlag(f, "out", "runs"), name: strFlag(f, "name", command), mode: runMode(f) };
  const env = strFlag(f, "env", command === "opd" ? "questworld" : "guess-number")!;
  const allowed = { arp: ARP_ENVS, opd: ["questworld", "guess-number"], oel: ["guess-number", "tau2"] }[command];
  if (!allowed.includes(env)) throw new UsageError(`--env must be ${allowed.join(" or ")}, got ${env}`);
  if (backend === "wasm") await initBackend("wasm");
  else setBackend("js");
  try {
    const modelDir = strFlag(f, "model");
    const { model, codec, source } = await loadStudent(modelDir, config.seed, config.baseDtype);
    const baseModel = { source, dir: modelDir };
    if (command === "arp") {
      const c = config as ArpConfig;
      const setup = arpEnvironment(env);
      const sourceTrajectories = await acquireExpertEpisodes(setup, c.data.sourceEpisodes, c.seed);
      const r = await runArp({
        ...io,
        model,
        codec,
        makeEnv: setup.makeEnv,
        makeEvalEnv: setup.makeEvalEnv,
        diagnose: setup.diagnose,
        sourceTrajectories,
        config: c,
        baseModel,
      });
      console.log(
        JSON.stringify({
          runDir: r.runDir,
          modelDir: r.modelDir,
          adapterDir: r.adapterDir,
          sftSize: r.sftSize,
          turnPairs: r.turnPairs,
          branchPairs: r.branchPairs,
          stages: r.stages,
          phases: r.phases.map((p) => ({
            phase: p.phase,
            n: p.n,
            score: p.score,
            delta: p.delta,
            errors: p.errors.length,
          })),
        }),
      );
      return 0;
    }
    if (command === "opd") {
      const c = config as OpdConfig;
      const teacherDir = strFlag(f, "teacher");
      const teacherUrl = strFlag(f, "teacher-url");
      let teacher: Policy | ((s: Policy) => Policy);
      if (teacherDir) {
        // A bigger local model; it must share the student's tokenizer (it scores the student's token ids).
        const t = await loadStudent(teacherDir, c.seed);
        assertSameTokenizer(codec.tokenizer, t.codec.tokenizer, `--teacher ${teacherDir}`);
        const big = new LocalPolicy({
          id: `teacher:${teacherDir}`,
          model: t.model,
          tokenizer: t.codec.tokenizer,
          chatTemplate: t.codec.template,
        });
        // A bigger model and a scaffold together: --teacher DIR --scaffold TEXT.
        const scaffold = strFlag(f, "scaffold");
        teacher = scaffold ? scaffoldedTeacher(big, scaffold) : big;
      } else if (teacherUrl) {
        // An OpenAI-compatible server scoring through /v1/completions echo; --teacher-tokenizer DIR
        // (the served model's files) lets kiln check that it tokenizes like the student.
        const tokDir = strFlag(f, "teacher-tokenizer");
        if (tokDir) assertSameTokenizer(codec.tokenizer, await loadTokenizer(tokDir), `--teacher-tokenizer ${tokDir}`);
        teacher = new HttpPolicy({
          baseUrls: teacherUrl.split(","),
          model: strFlag(f, "teacher-model", "default")!,
          renderPrompt: (messages, tools) =>
            codec.template.render([...messages], { tools: [...tools], addGenerationPrompt: true }),
          tokenizer: codec.tokenizer,
        });
      } else {
        const hint = strFlag(
          f,
          "scaffold",
          "Think about which tool call moves you forward, then make exactly one valid tool call.",
        )!;
        teacher = (student) => scaffoldedTeacher(student, hint);
      }
      const makeEnv: () => Environment =
        env === "questworld" ? () => new questworld.QuestworldEnvironment() : () => new GuessNumberEnv();
      const starts =
        env === "questworld" && c.wallStarts
          ? (round: number): EpisodeSpec[] =>
              questworld.ARCHETYPES.map((a) => ({
                id: `wall-${a}-r${round}`,
                seed: c.seed + round,
                state: questworld.wallState(a, c.seed + round),
              }))
          : undefined;
      const evaluate =
        env === "questworld"
          ? async (policy: Policy): Promise<OpdEvaluation> => {
              const r = await questworld.evaluateCore3({
                policy,
                seeds: c.eval.seeds,
                maxTurns: c.rollout.maxTurns,
                params: { maxTokens: c.rollout.maxTokens, temperature: 0 },
              });
              return {
                scores: Object.fromEntries(r.perSeed.map((s) => [`seed-${s.seed}`, s.total])),
                table: [
                  ["#", "quest stage", "passed", "of", "stopped here"],
                  ...r.wall.map((w) => [w.index, w.label, w.passed, w.of, w.stoppedHere]),
                ],
              };
            }
          : undefined;
      const r = await runOpdRounds({ ...io, model, codec, makeEnv, teacher, starts, evaluate, config: c, baseModel });
      console.log(
        JSON.stringify({
          runDir: r.runDir,
          rounds: r.rounds.map((x) => ({ round: x.round, samples: x.samples, modelDir: x.modelDir, eval: x.eval })),
        }),
      );
      console.log(r.phaseTable);
      return 0;
    }
    const c = config as OelConfig;
    if (env === "tau2") {
      // tau2 retail: the first `tasks` tasks of the split, a scripted customer (or --user-url), memories
      // from the deploy trajectories (experienceMemory).
      const split = (strFlag(f, "split", "train") ?? "train") as tau2.Tau2SplitName;
      const tasks = tau2.loadSplitTasks(split).slice(0, c.tasks);
      const userUrl = strFlag(f, "user-url");
      const user = (task: tau2.Tau2Task): Policy =>
        userUrl
          ? new HttpPolicy({ baseUrls: userUrl.split(","), model: strFlag(f, "user-model", "default")! })
          : tau2.scriptedUser(task);
      const makeEnv = () => new Tau2TasksEnvironment(tasks, user);
      const r = await runOel({
        ...io,
        model,
        codec,
        makeEnv,
        tasks: tasks.map((t, i) => ({ id: t.id, seed: c.seed + i, memory: "", state: { taskId: t.id } })),
        memoryFrom: (_task, deployed) => experienceMemory(deployed),
        config: c,
        baseModel,
      });
      console.log(
        JSON.stringify({ runDir: r.runDir, modelDir: r.modelDir, before: r.before, after: r.after, errors: r.errors }),
      );
      return 0;
    }
    const makeEnv = () => new GuessNumberEnv();
    const tasks = Array.from({ length: c.tasks }, (_, i) => {
      const probe = new GuessNumberEnv();
      probe.reset({ seed: c.seed + i });
      // Toy memory: what a previous episode of this task learnt (its secret).
      return {
        id: `task-${i}`,
        seed: c.seed + i,
        memory: `Memory: the secret number is ${probe.getState().secret}. Guess it directly.`,
      };
    });
    const r = await runOel({ ...io, model, codec, makeEnv, tasks, config: c, baseModel });
    console.log(
      JSON.stringify({ runDir: r.runDir, modelDir: r.modelDir, before: r.before, after: r.after, errors: r.errors }),
    );
    return 0;
  } finally {
    if (backend === "wasm") {
      setBackend("js");
      disposeWasmBackend();
    }
  }
}
