// `pnpm bench opd-expert-call [MODEL_DIR …]`: does an OPD round move the student towards the expert
// planner's call? On 144 held-out questworld states (questworldPrivilegedCorpus, seed 777: six mixed-skill
// wall-start episodes, the student's window), for the embedded agent model and each model directory given
// (e.g. a `kiln repro opd` run's rounds/rN/model): the mean log-prob of the expert's whole call, the mean of
// its least likely token (usually the argument that decides the move), and on how many states the greedy
// reply is exactly the expert's call. The table's greedy score only shows a change once a call flips; this
// shows which way the rounds push before one does (kit README, "OPD on questworld"). The last column is
// the log-prob of the one call that holds the students at the wall: from the woodsman's wall start (seed
// 0), after the expert's first move to the village, its `buy` of a sickle from Mara.
import { resolve } from "node:path";
import { questworld } from "@kiln/benchmarks";
import { LocalPolicy } from "@kiln/models";
import type { Message, ToolSchema } from "@kiln/rollout";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { agentModelDir } from "../src/agent-model/paths.js";
import { questworldOpdStart } from "../src/agent-model/questworld-corpus.js";
import { hermesToolCallText, toolCallGeneration } from "../src/agent-model/questworld-players.js";
import { questworldPrivilegedCorpus } from "../src/agent-model/questworld-privileged.js";
import { QUESTWORLD_WINDOW_KEEP, questworldView } from "../src/agent-model/questworld-window.js";
import { dirModelSource } from "../src/repro/model-source.js";

await initBackend("wasm");
const states = await questworldPrivilegedCorpus({ seed: 777, episodes: 6, maxTurns: 24 });

/** The student's view, tools and the expert's call at the expert's second turn from the woodsman's wall start. */
async function wallBuyState(): Promise<{ prompt: Message[]; tools: ToolSchema[]; call: questworld.ExpertCall }> {
  const env = new questworld.QuestworldEnvironment({ archetype: "woodsman" });
  const view = questworldView(QUESTWORLD_WINDOW_KEEP);
  let found: { prompt: Message[]; tools: ToolSchema[]; call: questworld.ExpertCall } | undefined;
  let turn = 0;
  await questworld.runQuestworldEpisode({
    env,
    seed: 0,
    archetype: "woodsman",
    state: questworldOpdStart("woodsman", 0),
    maxTurns: 2,
    policy: {
      id: "expert",
      async generate(messages, tools) {
        const call = questworld.nextExpertCall(env.getState());
        if (!call) throw new Error("the expert has no call from the wall start");
        if (turn === 1) found = { prompt: view(messages), tools: tools ?? [], call };
        return toolCallGeneration(call, turn++);
      },
    },
  });
  if (found?.call.name !== "buy")
    throw new Error(
      `the expert's second call from the woodsman's wall start is ${found?.call.name ?? "missing"}, not buy`,
    );
  return found;
}
const wall = await wallBuyState();

const dirs = [agentModelDir(), ...process.argv.slice(2).map((d) => resolve(process.env.INIT_CWD ?? ".", d))];
console.log(
  "| model | states | mean log q(expert call) | mean log q of its least likely token | greedy = expert | log q(the wall's buy) |",
);
console.log("|---|---|---|---|---|---|");
for (const dir of dirs) {
  const { model, codec } = await dirModelSource(dir).load();
  const policy = new LocalPolicy({ model, tokenizer: codec.tokenizer, chatTemplate: codec.template });
  const eos = codec.tokenizer.eosTokenId;
  if (eos === null) throw new Error(`${dir}: the tokenizer has no end-of-turn token`);
  const rows = await Promise.all(
    states.map(async (d) => {
      const prompt = d.messages.slice(0, -2); // the window without the note and the reply
      const ids = [...codec.tokenizer.encode(hermesToolCallText(d.expert)), eos];
      const { logprobs } = await policy.score(prompt, ids);
      const g = await policy.generate(prompt, undefined, { maxTokens: 64, temperature: 0 });
      const made = g.message.tool_calls?.[0]?.function;
      return {
        total: logprobs.reduce((a, b) => a + b, 0),
        least: Math.min(...logprobs),
        same: made?.name === d.expert.name && made.arguments === JSON.stringify(d.expert.arguments) ? 1 : 0,
      };
    }),
  );
  const mean = (f: (r: (typeof rows)[number]) => number) => rows.reduce((a, r) => a + f(r), 0) / rows.length;
  const same = rows.reduce((a, r) => a + r.same, 0);
  const buy = await policy.score(
    wall.prompt,
    [...codec.tokenizer.encode(hermesToolCallText(wall.call)), eos],
    wall.tools,
  );
  console.log(
    `| ${dir} | ${rows.length} | ${mean((r) => r.total).toFixed(3)} | ${mean((r) => r.least).toFixed(3)} | ${same}/${rows.length} | ${buy.logprobs.reduce((a, b) => a + b, 0).toFixed(3)} |`,
  );
}
setBackend("js");
disposeWasmBackend();
