// `kiln arp|opd|oel`: the recipes on tiny defaults (a random tiny Qwen3 with a character
// tokenizer, or --model DIR with its own tokenizer and chat template), on rollout's
// guess-number game, questworld (OPD, with wall-state seeded starts and Core-3 evaluation).
import { questworld } from "@kiln/benchmarks";
import { ChatTemplate, LocalPolicy, type Model, loadModel, loadTokenizer } from "@kiln/models";
import {
  type EpisodeSpec,
  GuessNumberEnv,
  ScriptedPolicy,
  type Environment,
  type Policy,
  guessNumberScript,
  runEpisodes,
} from "@kiln/rollout";
import { type BackendName, disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { type ParsedArgs, UsageError, intFlag, strFlag } from "../cli-main.js";
import { runArp } from "./arp.js";
import type { ChatCodec } from "./batches.js";
import { runOel } from "./oel.js";
import { scaffoldedTeacher } from "./opd-samples.js";
import { runOpdRounds } from "./opd.js";
import { tinyChat } from "./tiny-chat.js";

function numFlag(flags: ParsedArgs["flags"], name: string, fallback: number): number {
  const v = flags[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (v === true || !Number.isFinite(n)) throw new UsageError(`--${name} needs a number, got ${JSON.stringify(v)}`);
  return n;
}

async function loadStudent(dir: string | undefined, seed: number): Promise<{ model: Model; codec: ChatCodec }> {
  if (!dir) {
    const t = tinyChat({ seed, std: 0.2 });
    return { model: t.model, codec: { tokenizer: t.tokenizer, template: t.template } };
  }
  const tokenizer = await loadTokenizer(dir);
  return { model: await loadModel(dir), codec: { tokenizer, template: ChatTemplate.fromTokenizer(tokenizer) } };
}

export async function runRecipeCommand(command: "arp" | "opd" | "oel", args: ParsedArgs): Promise<number> {
  const f = args.flags;
  const backend = strFlag(f, "backend", "wasm") as BackendName;
  if (backend !== "wasm" && backend !== "js") throw new UsageError(`--backend must be wasm or js, got ${backend}`);
  const seed = intFlag(f, "seed", 0);
  const io = { out: strFlag(f, "out", "runs"), name: strFlag(f, "name", command) };
  const params = { maxTokens: intFlag(f, "max-tokens", 32) };
  const limits = { maxTurns: intFlag(f, "max-turns", 3) };
  const env = strFlag(f, "env", command === "opd" ? "questworld" : "guess-number");
  if (command === "opd" ? env !== "questworld" && env !== "guess-number" : env !== "guess-number")
    throw new UsageError(
      `--env must be ${command === "opd" ? "questworld or guess-number" : "guess-number"}, got ${env}`,
    );
  if (backend === "wasm") await initBackend("wasm");
  else setBackend("js");
  try {
    const { model, codec } = await loadStudent(strFlag(f, "model"), seed);
    if (command === "arp") {
      const makeEnv = () => new GuessNumberEnv();
      const expert = new ScriptedPolicy({ id: "bisect-expert", script: guessNumberScript({ malformedRate: 0.1 }) });
      const source = await runEpisodes({
        makeEnv,
        policy: expert,
        episodes: intFlag(f, "source-episodes", 8),
        baseSeed: seed,
        limits: { maxTurns: 8 },
        concurrency: 1,
      });
      const r = await runArp({
        ...io,
        model,
        codec,
        makeEnv,
        sourceTrajectories: source.trajectories,
        sft: { steps: intFlag(f, "sft-steps", 20), lr: 5e-3, batchSize: 2 },
        dpo: { steps: intFlag(f, "dpo-steps", 20), lr: 5e-3, beta: 0.1, batchSize: 2 },
        studentEpisodes: intFlag(f, "student-episodes", 4),
        branch: { k: intFlag(f, "k", 4), maxTrajectories: 2 },
        scale: numFlag(f, "scale", 0.85),
        maxChars: intFlag(f, "max-chars", 120),
        params,
        limits,
        seed,
      });
      console.log(
        JSON.stringify({
          runDir: r.runDir,
          sftSize: r.sftSize,
          sftLoss: r.sftLoss,
          turnPairs: r.turnPairs,
          branchPairs: r.branchPairs,
          dpoMargins: r.dpoMargins,
          before: r.before,
          after: r.after,
        }),
      );
      return 0;
    }
    if (command === "opd") {
      const teacherDir = strFlag(f, "teacher");
      let teacher: Policy | ((s: Policy) => Policy);
      if (teacherDir) {
        // A bigger local model; it must share the student's tokenizer (it scores the student's token ids).
        const t = await loadStudent(teacherDir, seed);
        teacher = new LocalPolicy({
          id: `teacher:${teacherDir}`,
          model: t.model,
          tokenizer: t.codec.tokenizer,
          chatTemplate: t.codec.template,
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
        env === "questworld"
          ? (round: number): EpisodeSpec[] =>
              questworld.ARCHETYPES.map((a) => ({
                id: `wall-${a}-r${round}`,
                seed: seed + round,
                state: questworld.wallState(a, seed + round),
              }))
          : undefined;
      const evaluate =
        env === "questworld"
          ? async (policy: Policy) => {
              const r = await questworld.evaluateCore3({
                policy,
                seeds: [seed + 1],
                maxTurns: limits.maxTurns,
                params: { ...params, temperature: 0 },
              });
              return { core3_mean: r.score.mean, core3_se: r.score.se ?? Number.NaN };
            }
          : undefined;
      const r = await runOpdRounds({
        ...io,
        model,
        codec,
        makeEnv,
        teacher,
        starts,
        evaluate,
        rounds: intFlag(f, "rounds", 2),
        episodesPerRound: intFlag(f, "episodes", 2),
        train: { steps: intFlag(f, "steps", 8), lr: numFlag(f, "lr", 1e-3), batchSize: 4 },
        params,
        limits,
        seed,
      });
      console.log(JSON.stringify(r));
      return 0;
    }
    const makeEnv = () => new GuessNumberEnv();
    const tasks = Array.from({ length: intFlag(f, "tasks", 4) }, (_, i) => {
      const probe = new GuessNumberEnv();
      probe.reset({ seed: seed + i });
      // Toy memory: what a previous episode of this task learnt (its secret and the bisection rule).
      return {
        id: `task-${i}`,
        seed: seed + i,
        memory: `Memory: the secret number is ${probe.getState().secret}. Guess it directly.`,
      };
    });
    const r = await runOel({
      ...io,
      model,
      codec,
      makeEnv,
      tasks,
      consolidate: { steps: intFlag(f, "steps", 10), lr: numFlag(f, "lr", 2e-3), batchSize: 4 },
      evalTrials: intFlag(f, "trials", 2),
      params,
      limits,
      seed,
    });
    console.log(JSON.stringify(r));
    return 0;
  } finally {
    if (backend === "wasm") {
      setBackend("js");
      disposeWasmBackend();
    }
  }
}
