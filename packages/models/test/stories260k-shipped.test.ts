import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generate, loadStories260K, stories260KPaths, stories260KUrls } from "../src/index.js";
import { FIXTURES } from "./helpers.js";

describe("the shipped stories260K", () => {
  it("stories260KPaths() points at the llama2.c files the fixtures were made from", () => {
    const paths = stories260KPaths();
    expect(paths.checkpoint).toBe(join(paths.dir, "stories260K.bin"));
    expect(stories260KUrls().checkpoint.protocol).toBe("file:");
    for (const [shipped, fixture] of [
      [paths.checkpoint, "stories260K.bin"],
      [paths.tokenizer, "tok512.bin"],
    ]) {
      expect(readFileSync(shipped).equals(readFileSync(join(FIXTURES, "stories260K", fixture)))).toBe(true);
    }
  });

  it("loadStories260K() gives the model and tokenizer that reproduce run.c's greedy text", async () => {
    const reference = JSON.parse(readFileSync(join(FIXTURES, "stories260K", "greedy.json"), "utf8")) as {
      cases: { prompt: string; prompt_ids: number[]; greedy_ids: number[]; text: string }[];
    };
    const { model, tokenizer, files } = await loadStories260K();
    expect(files.has("model.safetensors")).toBe(true);
    expect(model.config.numLayers).toBe(5);
    const c = reference.cases[1];
    expect(tokenizer.encode(c.prompt, { addSpecialTokens: true })).toEqual(c.prompt_ids);
    const [out] = generate(model, [c.prompt_ids], { greedy: true, maxNewTokens: 16, tokenizer, stopTokenIds: [] });
    expect(out.tokenIds).toEqual(c.greedy_ids.slice(0, 16));
    expect(c.text.startsWith(out.text)).toBe(true);
  });
});
