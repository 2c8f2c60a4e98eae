// `pnpm bench opd-wall-trace [MODEL_DIR …] [--seed N] [--turns N]`: what a model does at the questworld wall.
// For the embedded agent model and each model directory given (e.g. a `kiln repro opd` run's
// rounds/rN/model), one greedy episode per archetype from the wall start of evaluation seed N (default 0,
// `kiln repro opd`'s first), through the student's window, as `kiln repro opd` evaluates: on every turn the
// model's call beside the scripted expert planner's call for the same state, and how many agree. The
// Core-3 table says only that no agent passed the wall; this says which call held it there (kit README,
// "Why the rounds do not pass the wall").
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { questworld } from "@kiln/benchmarks";
import { LocalPolicy } from "@kiln/models";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { agentModelDir } from "../src/agent-model/paths.js";
import { questworldOpdStart } from "../src/agent-model/questworld-corpus.js";
import { QUESTWORLD_WINDOW_KEEP, WindowedPolicy } from "../src/agent-model/questworld-window.js";
import { dirModelSource } from "../src/repro/model-source.js";

// node:util's parser, strict: an unknown flag is an error, not a model directory.
function parseCommandLine() {
  try {
    return parseArgs({
      options: { seed: { type: "string", default: "0" }, turns: { type: "string", default: "24" } },
      allowPositionals: true,
    });
  } catch (error) {
    console.error(`${(error as Error).message}\nusage: pnpm bench opd-wall-trace [MODEL_DIR …] [--seed N] [--turns N]`);
    process.exit(2);
  }
}
const { values, positionals } = parseCommandLine();
function count(name: "seed" | "turns"): number {
  const value = Number(values[name]);
  if (!Number.isSafeInteger(value) || value < 0) {
    console.error(`--${name} needs a non-negative integer, got ${values[name]}`);
    process.exit(2);
  }
  return value;
}
const seed = count("seed");
const turns = count("turns");
const cwd = process.env.INIT_CWD ?? ".";
const dirs = [agentModelDir(), ...positionals.map((d) => resolve(cwd, d))];

await initBackend("native").catch(() => initBackend("wasm"));
const show = (call: { name: string; arguments: unknown } | undefined | null) =>
  call ? `${call.name} ${typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments)}` : "—";

for (const dir of dirs) {
  const { model, codec } = await dirModelSource(dir).load();
  const policy = new WindowedPolicy(
    new LocalPolicy({ model, tokenizer: codec.tokenizer, chatTemplate: codec.template }),
    { keep: QUESTWORLD_WINDOW_KEEP },
  );
  console.log(`\n## ${dir} (seed ${seed}, ${turns} turns, greedy)`);
  for (const archetype of questworld.ARCHETYPES) {
    const env = new questworld.QuestworldEnvironment({ archetype });
    const lines: string[] = [];
    let agree = 0;
    await questworld.runQuestworldEpisode({
      env,
      seed,
      archetype,
      state: questworldOpdStart(archetype, seed),
      maxTurns: turns,
      params: { maxTokens: 64, temperature: 0 },
      policy: {
        id: "traced",
        async generate(messages, tools, params) {
          const expert = questworld.nextExpertCall(env.getState());
          const g = await policy.generate(messages, tools, params);
          const made = g.message.tool_calls?.[0]?.function;
          const same = made !== undefined && show(made) === show(expert);
          if (same) agree++;
          lines.push(
            `| ${lines.length + 1} | ${made ? show(made) : "(no call)"} | ${show(expert)} | ${same ? "=" : ""} |`,
          );
          return g;
        },
      },
    });
    const stages = env.getState().quests;
    console.log(
      `\n${archetype}: ${agree} of ${lines.length} turns make the expert's call; quest stages at the end ${JSON.stringify(Object.fromEntries(Object.entries(stages).map(([q, s]) => [q, s.stage])))}`,
    );
    console.log("\n| turn | the model's call | the expert's call | same |\n|---|---|---|---|");
    console.log(lines.join("\n"));
  }
}
setBackend("js");
disposeWasmBackend();
