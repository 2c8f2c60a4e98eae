// `pnpm bench agent-model-wordle-lines [--model DIR] [--games a,b] [--backend NAME]`: how a model's Wordle replies
// follow the feedback before them. It plays every held-out instance of the Wordle games greedily (as
// agent-model-clem does) and reads each reply after feedback with readWordleReplies: whether it opens with the
// exact constraints of the constraint corpus (`--set corpus.wordleConstraintRate=1`), split into the reply to the
// first feedback and the later ones that must merge several; whether its guess fits every feedback so far; and
// whether it repeats the previous guess. Kit README, "The constraint corpus, built".
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { ChatTemplate, LocalPolicy, loadModel, loadTokenizer } from "@kiln/models";
import { trajectoryMessages } from "@kiln/rollout";
import { initBackend } from "@kiln/tensor";
import { evaluateClemHeldout } from "../src/agent-model/clem-eval.js";
import type { AgentClemGame } from "../src/agent-model/clem-players.js";
import { agentModelDir } from "../src/agent-model/paths.js";
import { readWordleReplies } from "../src/agent-model/wordle-players.js";

const WORDLE_GAMES = ["wordle", "wordle_withclue", "wordle_withcritic"] as const;
const USAGE = "usage: pnpm bench agent-model-wordle-lines [--model DIR] [--games a,b] [--backend NAME]";
// node:util's parser, strict: a mistyped flag is an error, not a run on the defaults.
function parseCommandLine() {
  try {
    return parseArgs({
      options: { model: { type: "string" }, games: { type: "string" }, backend: { type: "string" } },
    }).values;
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
}
const options = parseCommandLine();
// pnpm runs the bench in packages/kit; a relative --model is the caller's (INIT_CWD: where pnpm was run).
const dir = options.model ? resolve(process.env.INIT_CWD ?? ".", options.model) : agentModelDir();
const games = (options.games ?? WORDLE_GAMES.join(",")).split(",");
const unknown = games.filter((g) => !(WORDLE_GAMES as readonly string[]).includes(g));
if (unknown.length > 0) throw new Error(`unknown game(s) ${unknown.join(", ")}; this reads ${WORDLE_GAMES.join(", ")}`);
await initBackend((options.backend ?? "auto") as Parameters<typeof initBackend>[0]);

const tokenizer = await loadTokenizer(dir);
const policy = new LocalPolicy({
  id: "agent model",
  model: await loadModel(dir),
  tokenizer,
  chatTemplate: ChatTemplate.fromTokenizer(tokenizer),
});
const share = (k: number, n: number) => `${k} of ${n}`;
console.log(`${dir}\n`);
console.log(
  "| game | episodes | replies after feedback | constraints exact, first reply | constraints exact, later replies | guess fits the feedback | repeats the previous guess |",
);
console.log("|---|---|---|---|---|---|---|");
for (const game of games) {
  // 64 tokens a reply: kiln repro arp's budget, as agent-model-clem.
  const r = await evaluateClemHeldout({
    games: [game as AgentClemGame],
    policy,
    model: "agent model",
    params: { maxTokens: 64 },
    concurrency: 16,
  });
  const readings = r.trajectories.flatMap((t) => readWordleReplies(trajectoryMessages(t)));
  const first = readings.filter((x) => x.feedbacks === 1);
  const later = readings.filter((x) => x.feedbacks > 1);
  console.log(
    `| ${game} | ${r.trajectories.length} | ${readings.length} | ${share(first.filter((x) => x.constraintsExact).length, first.length)} | ${share(later.filter((x) => x.constraintsExact).length, later.length)} | ${share(readings.filter((x) => x.fitsFeedback).length, readings.length)} | ${share(readings.filter((x) => x.repeatsPrevious).length, readings.length)} |`,
  );
}
