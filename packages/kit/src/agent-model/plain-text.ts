// Plain text for the embedded agent model: short stories sampled from the stories260K model that
// ships with @kiln/models (llama2.c, MIT), so the corpus needs no downloaded data. Part of it trains
// the model (so it keeps a "static" skill besides the games) and part is held out: the held-out
// perplexity is the static score that shows what ARP's delta scaling preserves.
import { generate, loadStories260K } from "@kiln/models";

const OPENINGS = [
  "Once upon a time",
  "One day",
  "Lily and Tom",
  "There was a little dog",
  "The sun was shining",
  "A small bird",
  "Tim had a red ball",
  "In the park",
];

/** `count` stories of up to `maxTokens` tokens, sampled at temperature 0.8 from a seed, in printable ASCII. */
export async function sampleStories(options: { count: number; seed: number; maxTokens?: number }): Promise<string[]> {
  const { model, tokenizer } = await loadStories260K();
  const out: string[] = [];
  const batch = 16;
  for (let start = 0; start < options.count; start += batch) {
    const rows = Math.min(batch, options.count - start);
    const prompts = Array.from({ length: rows }, (_, r) =>
      tokenizer.encode(OPENINGS[(start + r) % OPENINGS.length], { addSpecialTokens: true }),
    );
    const gens = generate(model, prompts, {
      maxNewTokens: options.maxTokens ?? 160,
      temperature: 0.8,
      seeds: prompts.map((_, r) => options.seed * 100_003 + start + r + 1),
      tokenizer,
    });
    gens.forEach((g, r) => {
      const text = tokenizer.decode([...prompts[r], ...g.tokenIds], { skipSpecialTokens: true });
      out.push(cleanStory(text));
    });
  }
  return out;
}

/** Printable ASCII only, whitespace collapsed, cut after the last full sentence. */
export function cleanStory(text: string): string {
  const ascii = text
    .replace(/[\u2018\u2019]/g, "'")
    .replace(/[\u201c\u201d]/g, '"')
    .replace(/[^\x20-\x7e\n]/g, "")
    .replace(/\s+/g, " ")
    .trim();
  const end = Math.max(ascii.lastIndexOf("."), ascii.lastIndexOf("!"), ascii.lastIndexOf("?"));
  return end > 20 ? ascii.slice(0, end + 1) : ascii;
}
