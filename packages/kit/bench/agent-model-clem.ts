// `pnpm bench agent-model-clem [--model DIR] [--baseline DIR[,DIR…]] [--games a,b] [--backend NAME] [--max-tokens N]
// [--transcripts N]`: the embedded agent model's clembench measurement. Every held-out instance
// (agent-model/clem-split.ts) of each game the model was trained on, played greedily through ClemGameEnvironment
// beside the scripted partners, and the same instances played by the scripted experts; clemeval's table (quality,
// % played, clemscore) for both. --baseline plays the same instances with other model directories (other builds,
// other seeds) and prints each one's paired clemscore Δ against --model (clemscoreDelta: the same episodes, so
// the SE is that of the difference, not of two independent scores). --transcripts N prints the model's first N
// episodes of each game to stderr, one line per message.
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { clembench } from "@kiln/benchmarks";
import { ChatTemplate, LocalPolicy, loadModel, loadTokenizer } from "@kiln/models";
import { trajectoryMessages } from "@kiln/rollout";
import { initBackend } from "@kiln/tensor";
import { clemExpertPlayers, evaluateClemHeldout } from "../src/agent-model/clem-eval.js";
import { AGENT_CLEM_GAMES, type AgentClemGame } from "../src/agent-model/clem-players.js";
import { agentModelDir } from "../src/agent-model/paths.js";

const argv = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
// pnpm runs the bench in packages/kit; relative paths are the caller's (INIT_CWD: where pnpm was run).
const fromCaller = (p: string) => resolve(process.env.INIT_CWD ?? ".", p);
const dir = fromCaller(arg("model", agentModelDir()));
const baselines = argv.includes("--baseline")
  ? arg("baseline", "")
      .split(",")
      .filter((d) => d !== "")
      .map(fromCaller)
  : [];
if (argv.includes("--baseline") && baselines.length === 0) throw new Error("--baseline needs a model directory");
const games = arg("games", AGENT_CLEM_GAMES.join(",")).split(",") as AgentClemGame[];
const unknown = games.filter((g) => !(AGENT_CLEM_GAMES as readonly string[]).includes(g));
if (unknown.length > 0)
  throw new Error(`unknown game(s) ${unknown.join(", ")}; the model plays ${AGENT_CLEM_GAMES.join(", ")}`);
// Tokens per reply: `kiln repro arp`'s budget (arpClem.maxTokens). At 24 a Wordle reply that opens with its
// explanation line was cut before its guess, and the episode aborted.
const maxTokens = Number(arg("max-tokens", "64"));
if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new Error(`--max-tokens must be a positive integer`);
const transcripts = Number(arg("transcripts", "0"));
if (!Number.isInteger(transcripts) || transcripts < 0) throw new Error(`--transcripts must be an integer ≥ 0`);
await initBackend(arg("backend", "auto") as Parameters<typeof initBackend>[0]);

const t0 = Date.now();
const rows: clembench.ScoreRow[] = [];
rows.push(...(await evaluateClemHeldout({ games, policy: clemExpertPlayers(0), model: "scripted experts" })).rows);
async function evaluateModel(modelDir: string, name: string, printTranscripts: number) {
  const tokenizer = await loadTokenizer(modelDir);
  const policy = new LocalPolicy({
    id: name,
    model: await loadModel(modelDir),
    tokenizer,
    chatTemplate: ChatTemplate.fromTokenizer(tokenizer),
  });
  for (const game of games) {
    const t1 = Date.now();
    const r = await evaluateClemHeldout({ games: [game], policy, model: name, params: { maxTokens }, concurrency: 16 });
    rows.push(...r.rows);
    for (const t of r.trajectories.slice(0, printTranscripts)) {
      console.error(`── ${t.episodeId}: ${JSON.stringify(t.outcome.scores)}`);
      // The first message is the game's long instructions; the turns after it are what the model did.
      for (const m of trajectoryMessages(t).slice(1))
        console.error(`  ${m.role}: ${(m.content ?? "").replaceAll("\n", " | ")}`);
    }
    const c = r.table.rows[0].games[game];
    console.error(
      `${name}, ${game}: ${c.n} episodes, % played ${c.played}, quality ${c.quality} (${((Date.now() - t1) / 1000).toFixed(0)} s)`,
    );
  }
}
await evaluateModel(dir, "agent model", transcripts);
// Baselines are named by their directory, so that two of them never share a row of the table.
for (const [i, b] of baselines.entries()) await evaluateModel(b, `baseline ${i + 1} (${b})`, 0);
const table = clembench.clemTable(rows);
console.log(clembench.formatResultsMarkdown(table));
for (const row of table.rows) console.log(`${row.model}: clemscore ${row.clemscore} ± ${row.clemscoreSe.toFixed(2)}`);
for (const [i, b] of baselines.entries()) {
  const d = clembench.clemscoreDelta(rows, "agent model", `baseline ${i + 1} (${b})`);
  const sign = d.mean > 0 ? "+" : d.mean < 0 ? "−" : "±";
  console.log(
    `agent model − baseline ${i + 1}: ${sign}${Math.abs(d.mean).toFixed(2)} ± ${d.se.toFixed(2)} clemscore, paired over ${d.n} episodes`,
  );
}
console.log(`${((Date.now() - t0) / 1000).toFixed(0)} s wall, load ${loadavg()[0].toFixed(1)}`);
