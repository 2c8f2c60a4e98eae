// `kiln arp|opd|oel`: the recipes with typed configurations. `--preset seed` is the seed systems'
// card, `--preset tiny` (default) the same stages sized for a CPU; `--config FILE` overlays a JSON
// file and `--set path=value[;path=value…]` single fields; `--print-config` prints the effective
// configuration and exits. Without --model the student is the embedded tiny chat model (a random
// 2-layer Qwen3 with a character tokenizer): a pipeline check, not a benchmark.
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clembench, questworld, tau2 } from "@kiln/benchmarks";
import { ChatTemplate, LocalPolicy, type Model, loadModel, loadTokenizer } from "@kiln/models";
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
import { isHeldOutInstance, isTrainingInstance } from "../agent-model/clem-split.js";
import { agentModelDir } from "../agent-model/paths.js";
import { type OptionValues, UsageError, defineCommand, setAssignments } from "../cli/args.js";
import { onInterrupt, resumeCommand, shellQuote } from "../cli/interrupt.js";
import { acquireDirLock } from "../dir-lock.js";
import { type RolloutEngine, llamaCppRollouts } from "../llama-cpp-rollouts.js";
import { checkOutputSeparate } from "../output-dir.js";
import { type RunMode, checkRunName } from "../run-dir.js";
import { acquireExpertEpisodes, runArp } from "./arp.js";
import type { ChatCodec } from "../trainer/chat-batches.js";
import type { DiagnoseOptions } from "./diagnose.js";
import { runOel } from "./oel.js";
import { Tau2TasksEnvironment, experienceMemory } from "./oel-tau2.js";
import { assertSameTokenizer, scaffoldedTeacher } from "./opd-samples.js";
import type { OpdEvaluation } from "./opd.js";
import { runOpdRounds } from "./opd.js";
import {
  type ArpConfig,
  type OelConfig,
  type OpdConfig,
  type RecipeConfig,
  checkBaseDtype,
  overlayUserConfig,
  presetConfig,
} from "./presets.js";
import { checkRecipeConfig } from "./config-checks.js";
import { configProvenance, presetLayers, provenanceBlock } from "./preset-provenance.js";
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

/** What the recipe commands read to build their configuration. */
export interface RecipeConfigFlags {
  preset?: string;
  config?: string;
  /** `path=value` assignments; each entry may hold several separated by ";". */
  set?: string | readonly string[];
  seed?: number;
}

/**
 * The effective configuration: preset, then --config file, then --set fields, then --seed; every field
 * checked (checkRecipeConfig) so a bad value is refused before a run directory exists.
 */
export function effectiveConfig(command: "arp" | "opd" | "oel", flags: RecipeConfigFlags): RecipeConfig {
  let config: RecipeConfig;
  try {
    config = presetConfig(command, flags.preset ?? "tiny");
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  overlayUserConfig(config, flags.config, setAssignments(flags.set));
  if (flags.seed !== undefined) config.seed = flags.seed;
  try {
    checkRecipeConfig(config);
    checkBaseDtype(config.baseDtype);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
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
  const file = clembench.loadGameInstances(env);
  const words = (file.experiments[0].lang_keywords as { official_words_list: string[] }).official_words_list;
  const known = new Set(words.map((w) => w.toLowerCase()));
  const guessOf = (m: { content?: string | null }) => /guess:\s*(\S+)/i.exec(m.content ?? "")?.[1]?.toLowerCase();
  return {
    makeEnv: () => new clembench.ClemGameEnvironment({ game: env, pick: isTrainingInstance }),
    makeEvalEnv: () => new clembench.ClemGameEnvironment({ game: env, pick: isHeldOutInstance }),
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

const RECIPE_OPTIONS = {
  preset: {
    type: "string",
    choices: ["tiny", "seed"],
    default: "tiny",
    description: "stage sizes: tiny (a CPU) or the seed card's (`kiln presets` shows each value's source)",
  },
  config: { type: "string", placeholder: "FILE.json", description: "a JSON overlay of configuration fields" },
  set: {
    type: "string",
    multiple: true,
    placeholder: "PATH=V[;PATH=V…]",
    description: "single configuration fields (see --print-config for the paths), checked before anything is written",
  },
  "print-config": { type: "boolean", description: "print the effective configuration and exit" },
  model: {
    type: "string",
    placeholder: "DIR|random-tiny",
    description:
      "the student: a Hugging Face model directory (tokenizer + chat template); default: the embedded agent model; random-tiny: a random 2-layer Qwen3 with a character tokenizer (a pipeline check)",
  },
  out: { type: "string", default: "runs", placeholder: "DIR", description: "parent of the run directory" },
  name: {
    type: "string",
    placeholder: "NAME",
    description: "run directory name, one path component (default: the command)",
  },
  seed: { type: "integer", description: "overrides the configuration's seed" },
  resume: { type: "boolean", description: "continue the run directory from its checkpoints (same configuration)" },
  overwrite: { type: "boolean", description: "replace an existing run directory of that name" },
  backend: { type: "string", choices: ["wasm", "js"], default: "wasm", description: "tensor backend" },
} as const;

const OPD_OPTIONS = {
  env: { type: "string", choices: ["questworld", "guess-number"], default: "questworld", description: "the game" },
  teacher: { type: "string", placeholder: "DIR", description: "a bigger local teacher model (same tokenizer)" },
  "teacher-url": { type: "string", placeholder: "URL[,URL…]", description: "an OpenAI-compatible teacher server" },
  "teacher-model": { type: "string", default: "default", description: "the model name at --teacher-url" },
  "teacher-tokenizer": {
    type: "string",
    placeholder: "DIR",
    description: "the served teacher's tokenizer files, checked against the student's",
  },
  scaffold: {
    type: "string",
    placeholder: "TEXT",
    description: "the teacher's hint in the prompt (alone: the scaffolded student teaches)",
  },
  "rollout-engine": {
    type: "string",
    choices: ["kiln", "llama-cpp"],
    default: "kiln",
    description:
      "where rounds' rollouts run: kiln's student, or llama.cpp (optional node-llama-cpp: the base as GGUF f32, earlier rounds as GGUF LoRAs on it)",
  },
} as const;

const OEL_OPTIONS = {
  env: { type: "string", choices: ["guess-number", "tau2"], default: "guess-number", description: "the tasks" },
  split: { type: "string", choices: ["train", "test", "base"], default: "train", description: "tau2 task split" },
  "user-url": {
    type: "string",
    placeholder: "URL[,URL…]",
    description: "tau2: an OpenAI-compatible customer model (default: scripted)",
  },
  "user-model": { type: "string", default: "default", description: "tau2: the model name at --user-url" },
  "rollout-engine": {
    type: "string",
    choices: ["kiln", "llama-cpp"],
    default: "kiln",
    description:
      "where the deploy episodes run: kiln's student, or llama.cpp (optional node-llama-cpp: the base as GGUF f32); the memory-prompted teacher, training and evaluations stay in kiln",
  },
} as const;

const ARP_OPTIONS = {
  env: { type: "string", choices: ARP_ENVS, default: "guess-number", description: "the game" },
} as const;

type RecipeValues = OptionValues<typeof RECIPE_OPTIONS> &
  Partial<Omit<OptionValues<typeof OPD_OPTIONS>, "env">> &
  Partial<Omit<OptionValues<typeof OEL_OPTIONS>, "env">> & { env: string };

/** The last lines of every run: where its directory and report are. */
export function printRunEnd(runDir: string): void {
  console.log(`run directory: ${runDir}`);
  console.log(`report: ${join(runDir, "report.html")}`);
}

/** `kiln arp|opd|oel`: the command table's specs. */
export const recipeCommands = {
  arp: defineCommand({
    name: "arp",
    summary:
      "ARP: success-only SFT → turn-DPO (repeat/length) → turn-DPO (invalid/duplicate field) → branch-DPO from the current policy → W₀ + s·ΣΔ merged in fp32",
    description:
      "Writes runs/NAME/ (config, metrics, checkpoints, rollouts, report.html) with the merged model in model/ and the adapter in adapter/. Ctrl-C keeps the last checkpoint; --resume continues.",
    options: { ...ARP_OPTIONS, ...RECIPE_OPTIONS },
    examples: [
      "kiln arp --preset tiny --name arp-try",
      "kiln arp --model random-tiny --set sft.lr=1e-3 --print-config",
    ],
    run: (a) => runRecipeCommand("arp", a.values, a.argv),
  }),
  opd: defineCommand({
    name: "opd",
    summary:
      "on-policy distillation rounds (a fresh LoRA per round on the merged previous round), wall-state starts, Core-3 over the eval seeds",
    description:
      "Writes runs/NAME/rounds/rN/{adapter,model} and report.html. Ctrl-C keeps the last checkpoint; --resume continues.",
    options: { ...OPD_OPTIONS, ...RECIPE_OPTIONS },
    examples: ['kiln opd --env guess-number --scaffold "Bisect the range." --name opd-try'],
    run: (a) => runRecipeCommand("opd", a.values, a.argv),
  }),
  oel: defineCommand({
    name: "oel",
    summary:
      "OEL: deploy without memory → consolidate with the memory in the teacher prompt (full KL) → merge; greedy pass^k ± SE",
    description:
      "Writes runs/NAME/ with model/ and adapter/, report.html. Ctrl-C keeps the last checkpoint; --resume continues.",
    options: { ...OEL_OPTIONS, ...RECIPE_OPTIONS },
    examples: [
      "kiln oel --preset tiny --name oel-try",
      "kiln oel --env tau2 --set tasks=4",
      "kiln oel --rollout-engine llama-cpp --name oel-llama",
    ],
    run: (a) => runRecipeCommand("oel", a.values, a.argv),
  }),
};

export async function runRecipeCommand(
  command: "arp" | "opd" | "oel",
  f: RecipeValues,
  argv: readonly string[] = [],
): Promise<number> {
  const config = effectiveConfig(command, f);
  if (f["print-config"]) {
    console.log(JSON.stringify(config, null, 2));
    const preset = f.preset ?? "tiny";
    console.error(
      provenanceBlock(
        `kiln ${command} --preset ${preset}: where each value comes from`,
        configProvenance(command, presetLayers(command, preset), config),
      ),
    );
    return 0;
  }
  if (f.resume && f.overwrite) throw new UsageError("--resume and --overwrite exclude each other");
  const name = f.name ?? command;
  try {
    checkRunName(name);
  } catch (e) {
    throw new UsageError(`--name: ${(e as Error).message}`);
  }
  const backend = f.backend as BackendName;
  const mode: RunMode = f.resume ? "resume" : f.overwrite ? "overwrite" : "new";
  const io = { out: f.out, name, mode };
  const runDir = join(f.out, name);
  const env = f.env;
  const modelDir = f.model === "random-tiny" ? undefined : (f.model ?? agentModelDir());
  if (f["rollout-engine"] === "llama-cpp") {
    if (!modelDir) throw new UsageError("--rollout-engine llama-cpp needs a model directory (not --model random-tiny)");
    const dtype = (config as OpdConfig | OelConfig).baseDtype;
    if (dtype !== "f32") throw new UsageError(`--rollout-engine llama-cpp plays the f32 base; baseDtype is ${dtype}`);
  }
  const inputs = [
    ...(modelDir ? [{ label: "the model", path: modelDir }] : []),
    ...(f.teacher ? [{ label: "the teacher", path: f.teacher }] : []),
  ];
  try {
    checkOutputSeparate(runDir, inputs, "the run directory");
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (modelDir && !existsSync(join(modelDir, "config.json")))
    throw new UsageError(
      `--model ${f.model ?? `(the embedded agent model, ${modelDir})`}: no config.json there${
        f.model === undefined ? "; pass --model DIR, or --model random-tiny for a pipeline check" : ""
      }`,
    );
  const lock = acquireDirLock(runDir, ["kiln", command, ...argv].map(shellQuote).join(" "));
  const stopInterrupts = onInterrupt(() => runDir, resumeCommand(command, argv));
  if (backend === "wasm") await initBackend("wasm");
  else setBackend("js");
  try {
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
      printRunEnd(r.runDir);
      return 0;
    }
    if (command === "opd") {
      const c = config as OpdConfig;
      const teacherDir = f.teacher;
      const teacherUrl = f["teacher-url"];
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
        const scaffold = f.scaffold;
        teacher = scaffold ? scaffoldedTeacher(big, scaffold) : big;
      } else if (teacherUrl) {
        // An OpenAI-compatible server scoring through /v1/completions echo; --teacher-tokenizer DIR
        // (the served model's files) lets kiln check that it tokenizes like the student.
        const tokDir = f["teacher-tokenizer"];
        if (tokDir) assertSameTokenizer(codec.tokenizer, await loadTokenizer(tokDir), `--teacher-tokenizer ${tokDir}`);
        teacher = new HttpPolicy({
          baseUrls: teacherUrl.split(","),
          model: f["teacher-model"] ?? "default",
          renderPrompt: (messages, tools) =>
            codec.template.render([...messages], { tools: [...tools], addGenerationPrompt: true }),
          tokenizer: codec.tokenizer,
        });
      } else {
        const hint =
          f.scaffold ?? "Think about which tool call moves you forward, then make exactly one valid tool call.";
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
      let rolloutEngine: RolloutEngine | undefined;
      let engineDir: string | undefined;
      if (f["rollout-engine"] === "llama-cpp" && modelDir) {
        engineDir = await mkdtemp(join(tmpdir(), "kiln-opd-gguf-"));
        rolloutEngine = llamaCppRollouts({ baseDir: modelDir, workDir: engineDir });
      }
      const r = await runOpdRounds({
        ...io,
        model,
        codec,
        makeEnv,
        teacher,
        starts,
        evaluate,
        config: c,
        baseModel,
        rolloutEngine,
      }).finally(async () => {
        await rolloutEngine?.dispose();
        if (engineDir) await rm(engineDir, { recursive: true, force: true });
      });
      console.log(
        JSON.stringify({
          runDir: r.runDir,
          rounds: r.rounds.map((x) => ({ round: x.round, samples: x.samples, modelDir: x.modelDir, eval: x.eval })),
        }),
      );
      console.log(r.phaseTable);
      printRunEnd(r.runDir);
      return 0;
    }
    const c = config as OelConfig;
    // The deploy episodes on llama.cpp: the base exported to GGUF in a scratch directory, removed after.
    const oelEngine = async <T>(body: (engine: RolloutEngine | undefined) => Promise<T>): Promise<T> => {
      if (f["rollout-engine"] !== "llama-cpp" || !modelDir) return body(undefined);
      const workDir = await mkdtemp(join(tmpdir(), "kiln-oel-gguf-"));
      const engine = llamaCppRollouts({ baseDir: modelDir, workDir });
      try {
        return await body(engine);
      } finally {
        await engine.dispose();
        await rm(workDir, { recursive: true, force: true });
      }
    };
    if (env === "tau2") {
      // tau2 retail: the first `tasks` tasks of the split, a scripted customer (or --user-url), memories
      // from the deploy trajectories (experienceMemory).
      const split = (f.split ?? "train") as tau2.Tau2SplitName;
      const tasks = tau2.loadSplitTasks(split).slice(0, c.tasks);
      const userUrl = f["user-url"];
      const user = (task: tau2.Tau2Task): Policy =>
        userUrl
          ? new HttpPolicy({ baseUrls: userUrl.split(","), model: f["user-model"] ?? "default" })
          : tau2.scriptedUser(task);
      const makeEnv = () => new Tau2TasksEnvironment(tasks, user);
      const r = await oelEngine((rolloutEngine) =>
        runOel({
          ...io,
          model,
          codec,
          makeEnv,
          tasks: tasks.map((t, i) => ({ id: t.id, seed: c.seed + i, memory: "", state: { taskId: t.id } })),
          memoryFrom: (_task, deployed) => experienceMemory(deployed),
          config: c,
          baseModel,
          rolloutEngine,
        }),
      );
      console.log(
        JSON.stringify({ runDir: r.runDir, modelDir: r.modelDir, before: r.before, after: r.after, errors: r.errors }),
      );
      printRunEnd(r.runDir);
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
    const r = await oelEngine((rolloutEngine) =>
      runOel({ ...io, model, codec, makeEnv, tasks, config: c, baseModel, rolloutEngine }),
    );
    console.log(
      JSON.stringify({ runDir: r.runDir, modelDir: r.modelDir, before: r.before, after: r.after, errors: r.errors }),
    );
    printRunEnd(r.runDir);
    return 0;
  } finally {
    stopInterrupts();
    lock.release();
    if (backend === "wasm") {
      setBackend("js");
      disposeWasmBackend();
    }
  }
}
