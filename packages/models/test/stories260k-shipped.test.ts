import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generate, loadStories260K, stories260KPaths, stories260KUrls } from "../src/index.js";
import { FIXTURES } from "./helpers.js";

describe("the shipped stories260K", () => {
  it("stories260KPaths() points at the llama2.c files the fixtures were made from (the repository's one copy)", () => {
    const paths = stories260KPaths();
    expect(paths.checkpoint).toBe(join(paths.dir, "stories260K.bin"));
    expect(stories260KUrls().checkpoint.protocol).toBe("file:");
    // SHA-256 of karpathy/tinyllamas stories260K/{stories260K.bin, tok512.bin}, as SOURCES.md records them.
    const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");
    expect(sha(paths.checkpoint)).toBe("b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696");
    expect(sha(paths.tokenizer)).toBe("037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312");
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
