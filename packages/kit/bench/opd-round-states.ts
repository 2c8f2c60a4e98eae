// `pnpm bench opd-round-states RUN_DIR [--base MODEL_DIR] [--count TOOL]`: what a questworld OPD round trained on and what
// it learnt there. RUN_DIR is one arm of `kiln repro opd` (…/repro-opd/opd: rollouts/round-N.jsonl.gz,
// rounds/rN/model). Per round: how many of its rollouts' turns repeat the previous call and the share of
// the most frequent call (a student stuck in a loop hands the round one state many times); then, on the
// turns the round's teacher scored from (every turn with an expert call), the mean log-prob of the expert's
// call and how often the greedy reply is that call, for the base, the policy that played the rollouts
// (round N − 1) and the model trained on them (round N). `pnpm bench opd-expert-call` asks the same on
// held-out states; a round that gains on its own turns and loses there has learnt those turns, not the game
// (kit README, "OPD on questworld"). `--count buy` adds how many of a round's executed calls were `buy`.
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { LocalPolicy } from "@kiln/models";
import { type Trajectory, messagesBeforeTurn, readTrajectories } from "@kiln/rollout";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { agentModelDir } from "../src/agent-model/paths.js";
import { expertCallBeforeTurn } from "../src/agent-model/questworld-privileged.js";
import { hermesToolCallText } from "../src/agent-model/questworld-players.js";
import { QUESTWORLD_WINDOW_KEEP, questworldView } from "../src/agent-model/questworld-window.js";
import { dirModelSource } from "../src/repro/model-source.js";

const cwd = process.env.INIT_CWD ?? ".";
// node:util's parser, strict: an unknown flag is an error, not a run directory.
function parseCommandLine() {
  try {
    return parseArgs({
      options: { base: { type: "string" }, count: { type: "string" } },
      allowPositionals: true,
    });
  } catch (error) {
    console.error(
      `${(error as Error).message}\nusage: pnpm bench opd-round-states RUN_DIR [--base MODEL_DIR] [--count TOOL]`,
    );
    process.exit(2);
  }
}
const { values, positionals } = parseCommandLine();
const baseDir = values.base ? resolve(cwd, values.base) : agentModelDir();
const countTool = values.count;
const runArg = positionals[0];
if (!runArg) {
  console.error(
    "usage: pnpm bench opd-round-states RUN_DIR [--base MODEL_DIR] [--count TOOL]  (RUN_DIR: …/repro-opd/opd)",
  );
  process.exit(2);
}
const run = resolve(cwd, runArg);
const rounds: number[] = [];
for (let r = 1; existsSync(join(run, "rollouts", `round-${r}.jsonl.gz`)); r++) rounds.push(r);
if (rounds.length === 0) {
  console.error(`${run}: no rollouts/round-1.jsonl.gz (give one arm of a kiln repro opd run, e.g. …/repro-opd/opd)`);
  process.exit(2);
}

await initBackend("native").catch(() => initBackend("wasm"));
const view = questworldView(QUESTWORLD_WINDOW_KEEP);
const callKey = (name: string | undefined, args: unknown) =>
  name === undefined
    ? "(malformed: not executed)"
    : `${name} ${typeof args === "string" ? args : JSON.stringify(args)}`;

interface TurnItem {
  prompt: ReturnType<typeof view>;
  tools: Trajectory["tools"];
  expert: string;
  target: string;
}

const modelCache = new Map<string, Awaited<ReturnType<ReturnType<typeof dirModelSource>["load"]>>>();
async function policyOf(dir: string): Promise<{ policy: LocalPolicy; eos: number; encode: (s: string) => number[] }> {
  let loaded = modelCache.get(dir);
  if (!loaded) {
    loaded = await dirModelSource(dir).load();
    modelCache.set(dir, loaded);
  }
  const { model, codec } = loaded;
  const eos = codec.tokenizer.eosTokenId;
  if (eos === null) throw new Error(`${dir}: the tokenizer has no end-of-turn token`);
  return {
    policy: new LocalPolicy({ model, tokenizer: codec.tokenizer, chatTemplate: codec.template }),
    eos,
    encode: (s) => codec.tokenizer.encode(s),
  };
}

async function onTurns(dir: string, items: readonly TurnItem[]): Promise<{ logq: number; greedy: number }> {
  const { policy, eos, encode } = await policyOf(dir);
  let logq = 0;
  let greedy = 0;
  for (const it of items) {
    const { logprobs } = await policy.score(it.prompt, [...encode(it.target), eos], it.tools);
    logq += logprobs.reduce((a, b) => a + b, 0);
    const g = await policy.generate(it.prompt, it.tools, { maxTokens: 64, temperature: 0 });
    const made = g.message.tool_calls?.[0]?.function;
    if (made && callKey(made.name, made.arguments) === it.expert) greedy++;
  }
  return { logq: logq / Math.max(1, items.length), greedy };
}

console.log(
  `| round | rollouts | turns | repeat the previous call | most frequent call (share) |${countTool ? ` ${countTool} calls |` : ""} turns with an expert call | model | mean log q(expert call) | greedy = expert |`,
);
console.log(`|---|---|---|---|---|${countTool ? "---|" : ""}---|---|---|---|`);
for (const r of rounds) {
  const { trajectories } = await readTrajectories(join(run, "rollouts", `round-${r}.jsonl.gz`));
  const counts = new Map<string, number>();
  let turns = 0;
  let repeats = 0;
  let counted = 0;
  const items: TurnItem[] = [];
  for (const t of trajectories) {
    let previous: string | undefined;
    for (const turn of t.turns) {
      const call = turn.action[0];
      const key = callKey(call?.name, call?.arguments);
      turns++;
      if (key === previous) repeats++;
      previous = key;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      if (countTool !== undefined && call?.name === countTool) counted++;
      const expert = expertCallBeforeTurn(t, turn.index);
      if (expert)
        items.push({
          prompt: view(messagesBeforeTurn(t, turn.index)),
          tools: t.tools,
          expert: callKey(expert.name, expert.arguments),
          target: hermesToolCallText(expert),
        });
    }
  }
  const [topCall, topCount] = [...counts.entries()].sort((a, b) => b[1] - a[1])[0] ?? ["—", 0];
  const models: [string, string][] = [
    ["base", baseDir],
    ...(r > 1 ? ([[`r${r - 1} (played them)`, join(run, "rounds", `r${r - 1}`, "model")]] as [string, string][]) : []),
    [`r${r} (trained on them)`, join(run, "rounds", `r${r}`, "model")],
  ];
  for (const [label, dir] of models) {
    if (!existsSync(dir)) continue;
    const m = await onTurns(dir, items);
    console.log(
      `| ${r} | ${trajectories.length} | ${turns} | ${((100 * repeats) / Math.max(1, turns)).toFixed(1)} % | ${topCall} (${((100 * topCount) / Math.max(1, turns)).toFixed(1)} %) |${countTool ? ` ${counted} |` : ""} ${items.length} | ${label} | ${m.logq.toFixed(3)} | ${m.greedy}/${items.length} |`,
    );
  }
}
setBackend("js");
disposeWasmBackend();
