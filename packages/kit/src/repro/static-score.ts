// The static score: how well a model still predicts a fixed held-out text set (mean negative
// log-likelihood per token, and its perplexity exp(NLL)). ARP's delta scaling claims to keep this
// while the interactive score rises; the table shows both per phase.
import { existsSync, readFileSync } from "node:fs";
import { type Model, type Tokenizer, scoreCompletions } from "@kiln/models";
import { agentModelHeldoutPath } from "../agent-model/paths.js";

export interface StaticScore {
  /** Mean NLL per token of each text (the per-instance values of the SE and the paired Δ). */
  perText: Record<string, number>;
  tokens: number;
  /** Token-weighted mean NLL over all texts, and exp of it. */
  nll: number;
  perplexity: number;
}

/**
 * NLL of each text under the model, windows of `windowTokens` tokens (each window's first token is
 * context only). Texts shorter than two tokens are skipped.
 */
export function staticScore(
  model: Model,
  tokenizer: Tokenizer,
  texts: readonly string[],
  windowTokens = 128,
): StaticScore {
  const perText: Record<string, number> = {};
  let total = 0;
  let tokens = 0;
  texts.forEach((text, i) => {
    const ids = tokenizer.encode(text);
    let sum = 0;
    let count = 0;
    for (let start = 0; start + 1 < ids.length; start += windowTokens - 1) {
      const window = ids.slice(start, start + windowTokens);
      if (window.length < 2) break;
      const [lp] = scoreCompletions(model, [{ promptIds: window.slice(0, 1), completionIds: window.slice(1) }]);
      for (const v of lp) sum -= v;
      count += lp.length;
    }
    if (count === 0) return;
    perText[`text-${String(i).padStart(3, "0")}`] = sum / count;
    total += sum;
    tokens += count;
  });
  const nll = tokens ? total / tokens : Number.NaN;
  return { perText, tokens, nll, perplexity: Math.exp(nll) };
}

/**
 * Used while the agent model's held-out file is not shipped: a few plain sentences and game lines
 * in the style of the corpus (written for kiln).
 */
export const FALLBACK_HELDOUT_TEXTS: readonly string[] = [
  "The river ran past the old mill, and the children counted the boats until the sun went down.",
  "I picked a number between 1 and 100. Make a guess.",
  "Higher. The number is larger than 50.",
  "Lower. The number is smaller than 75.",
  "Correct! You found the number in five guesses.",
  "A quiet morning in the village: the baker opened early and the market filled with people.",
  "You are in a small room with a locked chest. A key lies on the table.",
  "Take the key, open the chest, then go north to the hall.",
  "The word has five letters. Your guess shares two letters with it.",
  "She wrote a short note, folded it twice and left it on the kitchen table.",
  "Rain fell all afternoon, so they stayed inside and played cards by the window.",
  "Guess the middle of the numbers that are still possible, and the game ends quickly.",
];

/**
 * The held-out texts (one per non-empty line) of the first `heldout.txt` that exists among
 * `paths` (default: the embedded agent model's), else the built-in fallback.
 */
export function heldoutTexts(
  maxTexts: number,
  paths: readonly string[] = [agentModelHeldoutPath()],
): { texts: string[]; source: string } {
  const path = paths.find((p) => existsSync(p));
  if (path) {
    const texts = readFileSync(path, "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.length > 0);
    return { texts: texts.slice(0, maxTexts), source: path };
  }
  return {
    texts: FALLBACK_HELDOUT_TEXTS.slice(0, maxTexts),
    source: "built-in fallback texts (heldout.txt not shipped)",
  };
}
