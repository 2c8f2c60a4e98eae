import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { HttpPolicy, type Policy, TrajectoryWriter } from "@kiln/rollout";
import { Tau2Error } from "./errors.js";
import { oracleAgent, scriptedUser } from "./oracle.js";
import { writeTau2Results } from "./report.js";
import { consoleProgress, runTau2 } from "./runner.js";
import type { Tau2SplitName, Tau2Task } from "./tasks.js";
import type { Tau2TaskVersion } from "./tool-specs.js";

// The tau2 runner's command line (the body of `kiln eval tau2` until the kit CLI wires it):
//   --agent oracle | --agent-url URL --agent-model NAME
//   --user scripted | --user-url URL --user-model NAME
//   [--judge-url URL --judge-model NAME] [--split test] [--task-version v1.0] [--tasks 5,9]
//   [--trials 3] [--concurrency 4] [--max-steps 200] [--max-errors 10] [--out runs/tau2]

export interface Tau2CliArgs {
  agent: { kind: "oracle" } | { kind: "http"; url: string; model: string };
  user: { kind: "scripted" } | { kind: "http"; url: string; model: string };
  judge?: { url: string; model: string };
  split: Tau2SplitName;
  version: Tau2TaskVersion;
  taskIds?: string[];
  trials: number;
  concurrency: number;
  maxSteps: number;
  maxErrors: number;
  out: string;
  progress: boolean;
}

export const TAU2_CLI_USAGE = `usage: kiln eval tau2 --agent oracle | --agent-url URL --agent-model NAME
       [--user scripted | --user-url URL --user-model NAME] [--judge-url URL --judge-model NAME]
       [--split test|train|base] [--task-version v1.0|v0.2.0] [--tasks 5,9,12] [--trials 3]
       [--concurrency 4] [--max-steps 200] [--max-errors 10] [--out runs/tau2] [--no-progress]`;

function positiveInt(flag: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Tau2Error(`tau2 cli: ${flag} must be a positive integer, got "${v}"`);
  return n;
}

export function parseTau2Args(argv: readonly string[]): Tau2CliArgs {
  const flags = new Map<string, string>();
  const bools = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) throw new Tau2Error(`tau2 cli: unexpected argument "${a}"\n${TAU2_CLI_USAGE}`);
    if (a === "--no-progress") {
      bools.add(a);
      continue;
    }
    const v = argv[i + 1];
    if (v === undefined || v.startsWith("--")) throw new Tau2Error(`tau2 cli: ${a} needs a value\n${TAU2_CLI_USAGE}`);
    flags.set(a, v);
    i++;
  }
  const known = new Set([
    "--agent",
    "--agent-url",
    "--agent-model",
    "--user",
    "--user-url",
    "--user-model",
    "--judge-url",
    "--judge-model",
    "--split",
    "--task-version",
    "--tasks",
    "--trials",
    "--concurrency",
    "--max-steps",
    "--max-errors",
    "--out",
  ]);
  for (const k of flags.keys())
    if (!known.has(k)) throw new Tau2Error(`tau2 cli: unknown flag ${k}\n${TAU2_CLI_USAGE}`);
  const endpoint = (who: string): { kind: "http"; url: string; model: string } | undefined => {
    const url = flags.get(`--${who}-url`);
    const model = flags.get(`--${who}-model`);
    if (url === undefined && model === undefined) return undefined;
    if (url === undefined || model === undefined)
      throw new Tau2Error(`tau2 cli: --${who}-url and --${who}-model go together`);
    return { kind: "http", url, model };
  };
  const agentHttp = endpoint("agent");
  const agentFlag = flags.get("--agent");
  if (agentFlag !== undefined && agentFlag !== "oracle")
    throw new Tau2Error(`tau2 cli: --agent must be "oracle", got "${agentFlag}"`);
  if (!agentHttp && agentFlag === undefined) throw new Tau2Error(`tau2 cli: no agent given\n${TAU2_CLI_USAGE}`);
  const userHttp = endpoint("user");
  const userFlag = flags.get("--user");
  if (userFlag !== undefined && userFlag !== "scripted")
    throw new Tau2Error(`tau2 cli: --user must be "scripted", got "${userFlag}"`);
  const split = (flags.get("--split") ?? "test") as Tau2SplitName;
  if (!["test", "train", "base"].includes(split))
    throw new Tau2Error(`tau2 cli: --split must be test, train or base, got "${split}"`);
  const version = (flags.get("--task-version") ?? "v1.0") as Tau2TaskVersion;
  if (version !== "v1.0" && version !== "v0.2.0")
    throw new Tau2Error(`tau2 cli: --task-version must be v1.0 or v0.2.0, got "${version}"`);
  const judge = endpoint("judge");
  return {
    agent: agentHttp ?? { kind: "oracle" },
    user: userHttp ?? { kind: "scripted" },
    ...(judge ? { judge: { url: judge.url, model: judge.model } } : {}),
    split,
    version,
    ...(flags.has("--tasks")
      ? {
          taskIds: (flags.get("--tasks") as string)
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean),
        }
      : {}),
    trials: positiveInt("--trials", flags.get("--trials") ?? "3"),
    concurrency: positiveInt("--concurrency", flags.get("--concurrency") ?? "4"),
    maxSteps: positiveInt("--max-steps", flags.get("--max-steps") ?? "200"),
    maxErrors: positiveInt("--max-errors", flags.get("--max-errors") ?? "10"),
    out: flags.get("--out") ?? "runs/tau2",
    progress: !bools.has("--no-progress"),
  };
}

/** Run the benchmark from command-line arguments; writes results under --out. Returns an exit code. */
export async function tau2Main(argv: readonly string[], log: (line: string) => void = console.log): Promise<number> {
  const args = parseTau2Args(argv);
  const http = (e: { url: string; model: string }, id: string): Policy =>
    new HttpPolicy({ baseUrls: e.url, model: e.model, id });
  const agent = args.agent.kind === "oracle" ? oracleAgent : http(args.agent, `http:${args.agent.model}`);
  const user =
    args.user.kind === "scripted" ? (t: Tau2Task) => scriptedUser(t) : http(args.user, `user:${args.user.model}`);
  mkdirSync(args.out, { recursive: true });
  const writer = await TrajectoryWriter.open(join(args.out, "trajectories.rollout.jsonl.gz"), { mode: "overwrite" });
  try {
    const run = await runTau2({
      agent,
      user,
      judge: args.judge ? http(args.judge, `judge:${args.judge.model}`) : undefined,
      split: args.split,
      version: args.version,
      taskIds: args.taskIds,
      numTrials: args.trials,
      concurrency: args.concurrency,
      maxSteps: args.maxSteps,
      maxErrors: args.maxErrors,
      onProgress: args.progress ? consoleProgress() : undefined,
      sink: writer,
    });
    const files = writeTau2Results(args.out, run);
    for (const p of run.metrics.passHatK)
      log(`pass^${p.k} = ${(100 * p.value).toFixed(1)}% ± ${(100 * p.stderr).toFixed(1)}`);
    log(`results: ${files.json}, ${files.markdown}`);
  } finally {
    await writer.close();
  }
  return 0;
}
