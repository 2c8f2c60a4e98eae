// `pnpm bench agent-model-copy [--model DIR] [--items N] [--backend NAME]`: can the embedded agent model copy
// from its context? The games' experts copy (guesswhat names the next candidate) and reverse (taboo's
// clue) words of the prompt; this asks for the same in the copy drills' plain-text notation
// (agent-model/drills.ts), on Wordle words no drill used, and reports per kind — a five-word list said
// again, a word's reversal, the next candidate not yet asked about — the greedy replies that start with the
// answer and the answer's teacher-forced loss (nats per token; a model that cannot copy pays about the
// cost of guessing the words, one that copies goes toward 0).
import { resolve } from "node:path";
import { clembench } from "@kiln/benchmarks";
import { collateSft, sftLoss } from "@kiln/losses";
import { generate, loadModel, loadTokenizer } from "@kiln/models";
import { mulberry32 } from "@kiln/rollout";
import { initBackend, tidy } from "@kiln/tensor";
import { copyDrillLine, spellingDrillWords } from "../src/agent-model/drills.js";
import { agentModelDir } from "../src/agent-model/paths.js";

const argv = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
// pnpm runs the bench in packages/kit; relative paths are the caller's (INIT_CWD: where pnpm was run).
const fromCaller = (p: string) => resolve(process.env.INIT_CWD ?? ".", p);
const dir = fromCaller(arg("model", agentModelDir()));
const items = Number(arg("items", "30"));
if (!Number.isInteger(items) || items < 1) throw new Error("--items must be a positive integer");
await initBackend(arg("backend", "auto") as Parameters<typeof initBackend>[0]);
const tokenizer = await loadTokenizer(dir);
const model = await loadModel(dir);

const drilled = new Set(spellingDrillWords(0));
const wordle = (
  clembench.loadInstances("wordle").experiments[0].lang_keywords as { official_words_list: string[] }
).official_words_list.filter((w) => !drilled.has(w));
const rng = mulberry32(20_261_203);
const kinds = ["repeat", "reversal", "next candidate"] as const;
const examples: string[] = [];
for (let k = 0; k < kinds.length; k++) {
  let exact = 0;
  let nll = 0;
  let answerTokens = 0;
  for (let i = 0; i < items; i++) {
    const words = new Set<string>();
    while (words.size < 8) words.add(wordle[Math.floor(rng() * wordle.length)]);
    const line = copyDrillLine([...words], k, Math.floor(rng() * 8));
    const cut = line.lastIndexOf(k === 0 ? "again:" : k === 1 ? "clue:" : "next:");
    const prompt = line.slice(0, line.indexOf(":", cut) + 1);
    const answer = line.slice(prompt.length);
    const [g] = generate(model, [tokenizer.encode(prompt)], {
      maxNewTokens: 24,
      temperature: 0,
      tokenizer,
      stopStrings: ["\n"],
    });
    const said = g.text.split("\n")[0];
    const promptIds = tokenizer.encode(prompt);
    const ids = Int32Array.from(tokenizer.encode(line));
    const mask = new Uint8Array(ids.length).fill(1, promptIds.length);
    tidy(() => {
      const b = collateSft([{ ids, mask }], tokenizer.padTokenId ?? 0, -100, ids.length);
      const n = ids.length - promptIds.length;
      nll += sftLoss(model.chunkedLogits(b.inputIds, {}), b.labels, {}).loss.item() * n;
      answerTokens += n;
    });
    if (said.trim().startsWith(answer.trim())) exact++;
    if (i < 2) examples.push(`${kinds[k]}: ${prompt} → ${JSON.stringify(said)} (want ${JSON.stringify(answer)})`);
  }
  console.log(
    `${kinds[k]}: ${exact} / ${items} replies start with the answer; answer loss ${(nll / answerTokens).toFixed(3)} nats/token`,
  );
}
console.log(examples.join("\n"));
