// A byte-pair-encoding tokenizer learnt from a corpus, written as a Hugging Face tokenizer.json that
// @huggingface/tokenizers (and so @kiln/models) loads: a regex Split pre-tokenizer (words with their
// leading space, single digits, punctuation runs, whitespace), BPE merges over printable ASCII (plus any other character the corpus uses), the
// ChatML special tokens as added tokens, and a Fuse decoder. Digits stay single tokens so numbers
// are spelled the same way wherever they occur.
import type { Tokenizer } from "@kiln/models";
import { chatmlBpeTokenizer } from "@kiln/models";
import { CHATML_SPECIAL_TOKENS } from "@kiln/rollout";

/** The pre-tokenizer's pattern; merges never cross its pieces. */
export const PRETOKENIZE_PATTERN = " ?[A-Za-z]+|[0-9]| ?[^A-Za-z0-9\\s]+|\\s+";

export class BpeTrainingError extends Error {
  override name = "BpeTrainingError";
}

const BASE_CHARS = ["\n", ...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i))];

function splitSpecial(text: string): string[] {
  let parts = [text];
  for (const s of CHATML_SPECIAL_TOKENS) parts = parts.flatMap((p) => p.split(s));
  return parts;
}

/**
 * Learn `vocabSize − specials − base characters` merges from `texts` (most frequent adjacent pair
 * first, ties broken by the pair's text so the result is deterministic) and build the tokenizer.
 */
export function trainBpeTokenizer(texts: readonly string[], vocabSize: number): Tokenizer {
  const base = CHATML_SPECIAL_TOKENS.length + BASE_CHARS.length;
  if (!Number.isInteger(vocabSize) || vocabSize < base)
    throw new BpeTrainingError(`vocabSize must be an integer ≥ ${base} (specials + printable ASCII), got ${vocabSize}`);
  const wordCounts = new Map<string, number>();
  const re = new RegExp(PRETOKENIZE_PATTERN, "g");
  const ascii = new Set(BASE_CHARS);
  const extra = new Set<string>();
  for (const text of texts)
    for (const part of splitSpecial(text))
      for (const m of part.matchAll(re)) {
        const w = m[0];
        for (const ch of w) if (!ascii.has(ch)) extra.add(ch);
        wordCounts.set(w, (wordCounts.get(w) ?? 0) + 1);
      }
  // Characters beyond ASCII that the corpus uses (e.g. questworld's dashes) join the base alphabet.
  const alphabet = [...BASE_CHARS, ...[...extra].sort()];
  if (vocabSize < base + extra.size)
    throw new BpeTrainingError(
      `vocabSize ${vocabSize} leaves no room for the corpus alphabet (${base + extra.size} symbols)`,
    );
  const words = [...wordCounts.entries()].map(([w, count]) => ({ symbols: [...w], count }));
  const merges: [string, string][] = [];
  const vocab = new Map<string, number>();
  for (const s of CHATML_SPECIAL_TOKENS) vocab.set(s, vocab.size);
  for (const c of alphabet) vocab.set(c, vocab.size);
  while (vocab.size < vocabSize) {
    const pairs = new Map<string, number>();
    for (const w of words)
      for (let i = 0; i + 1 < w.symbols.length; i++) {
        const key = `${w.symbols[i]}\u0000${w.symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + w.count);
      }
    let best: string | null = null;
    let bestCount = 1;
    for (const [key, count] of pairs)
      if (count > bestCount || (count === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = count;
      }
    if (best === null) break; // nothing occurs twice: the corpus is exhausted
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    vocab.set(a + b, vocab.size);
    for (const w of words) {
      const s = w.symbols;
      const out: string[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) {
          out.push(a + b);
          i++;
        } else out.push(s[i]);
      }
      w.symbols = out;
    }
  }
  return bpeTokenizer(Object.fromEntries(vocab), merges);
}

/** The tokenizer.json for a vocabulary and merge list (ChatML specials first), split by PRETOKENIZE_PATTERN. */
export function bpeTokenizer(vocab: Record<string, number>, merges: [string, string][]): Tokenizer {
  return chatmlBpeTokenizer(vocab, merges, {
    type: "Split",
    pattern: { Regex: PRETOKENIZE_PATTERN },
    behavior: "Isolated",
    invert: false,
  });
}
