import { readFileSync } from "node:fs";
import { join } from "node:path";
import { convertLlama2cToHf } from "@kiln/hub-io";
import { describe, expect, it } from "vitest";
import { generate, loadModel, loadTokenizer } from "../src/index.js";
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
    new Uint8Array(readFileSync(join(dir, "stories260K.bin"))),
    new Uint8Array(readFileSync(join(dir, "tok512.bin"))),
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
      expect(out.text.trimStart()).toBe(c.text.trimStart());
    });
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
