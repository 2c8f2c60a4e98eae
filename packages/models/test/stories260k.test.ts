import { readFileSync } from "node:fs";
import { join } from "node:path";
import { convertLlama2cToHf } from "@kiln/hub-io";
import { describe, expect, it } from "vitest";
import { generate, loadModel, loadTokenizer, stories260KPaths } from "../src/index.js";
import { FIXTURES } from "./helpers.js";

interface GreedyCase {
  prompt: string;
  prompt_ids: number[];
  greedy_ids: number[];
  text: string;
  min_top2_gap: number;
}

const dir = join(FIXTURES, "stories260K");
const reference = JSON.parse(readFileSync(join(dir, "greedy.json"), "utf8")) as { steps: number; cases: GreedyCase[] };

describe("stories260K (llama2.c) converted by hub-io", () => {
  const converted = convertLlama2cToHf(
    new Uint8Array(readFileSync(stories260KPaths().checkpoint)),
    new Uint8Array(readFileSync(stories260KPaths().tokenizer)),
  );

  it("greedy decoding matches the run.c transcription token for token (batched, left-padded)", async () => {
    const model = await loadModel(converted.files);
    expect(model.config.architecture).toBe("LlamaForCausalLM");
    expect(model.config.tieWordEmbeddings).toBe(true);
    const tokenizer = await loadTokenizer(converted.files);
    const outs = generate(
      model,
      reference.cases.map((c) => c.prompt_ids),
      { greedy: true, maxNewTokens: reference.steps, tokenizer, stopTokenIds: [] },
    );
    outs.forEach((out, i) => {
      const c = reference.cases[i];
      expect(c.min_top2_gap).toBeGreaterThan(1e-2);
      expect(out.tokenIds).toEqual(c.greedy_ids);
      expect(out.finishReason).toBe("length");
      // run.c prints each token as it continues the text, so a word start keeps its space (" Once", ", there")
      expect(out.text).toBe(c.text);
      const promptText = tokenizer.decode(c.prompt_ids);
      expect(promptText + out.text).toBe(tokenizer.decode([...c.prompt_ids, ...out.tokenIds]));
    });
  });

  it("tokenText keeps a token's word-start space; decodeContinuation joins prompt and completion", async () => {
    const tokenizer = await loadTokenizer(converted.files);
    const [she] = tokenizer.encode("She");
    expect(tokenizer.idToToken(she)).toBe("\u2581She");
    expect(tokenizer.decode([she])).toBe("She"); // what the decoder does at the start of a text
    expect(tokenizer.tokenText(she)).toBe(" She");
    const [dot] = tokenizer.encode(".").slice(-1);
    expect(tokenizer.tokenText(dot)).toBe(".");
    const prompt = tokenizer.encode("She was happy.");
    const rest = tokenizer.encode("She smiled.");
    expect(tokenizer.decodeContinuation(prompt, rest)).toBe(" She smiled.");
    // a character split into byte-fallback pieces across the boundary comes out whole in the continuation
    const emoji = tokenizer.encode("a \u{1F600} b");
    const split = emoji.findIndex((id) => /^<0x/.test(tokenizer.idToToken(id) ?? "")) + 1;
    expect(split).toBeGreaterThan(1);
    expect(tokenizer.decode(emoji)).toBe("a \u{1F600} b");
    expect(tokenizer.decodeContinuation(emoji.slice(0, split), emoji.slice(split))).toBe("\u{1F600} b");
  });

  it("stops at a stop string and cuts the text before it", async () => {
    const model = await loadModel(converted.files);
    const tokenizer = await loadTokenizer(converted.files);
    const c = reference.cases[1];
    const [out] = generate(model, [c.prompt_ids], {
      greedy: true,
      maxNewTokens: reference.steps,
      tokenizer,
      stopStrings: ["Lily", "park"],
    });
    const cut = c.text.indexOf("Lily");
    expect(cut).toBeGreaterThan(0);
    expect(out.finishReason).toBe("stop");
    expect(out.stoppedBy).toBe("Lily");
    expect(out.text).toBe(c.text.slice(0, cut));
    expect(out.tokenIds).toEqual(c.greedy_ids.slice(0, out.tokenIds.length));
    expect(tokenizer.decode(out.tokenIds)).toContain("Lily");
  });

  it("the converted tokenizer encodes prompts as run.c does", async () => {
    const tokenizer = await loadTokenizer(converted.files);
    for (const c of reference.cases.filter((x) => x.prompt !== "")) {
      expect(tokenizer.encode(c.prompt, { addSpecialTokens: true })).toEqual(c.prompt_ids);
    }
  });
});
