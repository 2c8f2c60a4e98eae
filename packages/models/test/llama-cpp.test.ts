// kiln's GGUF export run in llama.cpp (node-llama-cpp's prebuilt CPU build): stories260K written by
// `exportModelToGguf` gives run.c's greedy tokens (test/fixtures/stories260K/greedy.json) and kiln's
// own. Where node-llama-cpp does not load, the suite says so in one line and its tests are skipped;
// with KILN_LLAMA_CPP=required (set by `npm test` where the package loads) that fails instead.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { convertLlama2cToHf, exportModelToGguf, writeRepoFiles } from "@kiln/hub-io";
import { afterAll, describe, expect, it } from "vitest";
import {
  type LlamaCppHandle,
  LlamaCppUnavailableError,
  generate,
  loadConfig,
  loadModel,
  loadTokenizer,
  loadLlamaCpp,
  stories260KPaths,
} from "../src/index.js";
import { FIXTURES } from "./helpers.js";

const required = process.env.KILN_LLAMA_CPP === "required";
let llama: LlamaCppHandle | undefined;
let unavailable: string | null = null;
try {
  llama = await loadLlamaCpp();
} catch (e) {
  unavailable = (e as Error).message;
}
if (unavailable) process.stderr.write(`llama.cpp tests skipped: ${unavailable}\n`);

interface GreedyCase {
  prompt: string;
  prompt_ids: number[];
  greedy_ids: number[];
}
const fixtures = join(FIXTURES, "stories260K");
const reference = JSON.parse(readFileSync(join(fixtures, "greedy.json"), "utf8")) as {
  steps: number;
  cases: GreedyCase[];
};
const tmp = mkdtempSync(join(tmpdir(), "kiln-llama-cpp-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("llama.cpp availability", () => {
  it.runIf(required)("node-llama-cpp loads (KILN_LLAMA_CPP=required)", () => {
    expect(unavailable).toBeNull();
  });
  it.skipIf(unavailable === null)(`llama.cpp unavailable here: ${unavailable ?? ""}`, () => {});
  it("a missing node-llama-cpp is a one-line LlamaCppUnavailableError", () => {
    const e = new LlamaCppUnavailableError("llama.cpp unavailable: x");
    expect(e.message).not.toContain("\n");
    expect(e.name).toBe("LlamaCppUnavailableError");
  });
});

describe.skipIf(unavailable !== null)("stories260K through kiln's GGUF export, in llama.cpp", () => {
  const hfDir = join(tmp, "stories260K");
  const ggufPath = join(tmp, "stories260K.gguf");
  const ready = (async () => {
    const converted = convertLlama2cToHf(
      new Uint8Array(readFileSync(stories260KPaths().checkpoint)),
      new Uint8Array(readFileSync(stories260KPaths().tokenizer)),
    );
    await writeRepoFiles(hfDir, converted.files);
    await exportModelToGguf(hfDir, ggufPath, { dtype: "f32" });
  })();

  it("greedy decoding = run.c's = kiln's, token for token, and llama.cpp tokenises run.c's prompts the same", async () => {
    await ready;
    const model = await (llama as LlamaCppHandle).loadModel({ modelPath: ggufPath, gpuLayers: 0 });
    const kiln = await loadModel(hfDir);
    const tokenizer = await loadTokenizer(hfDir);
    const kilnOuts = generate(
      kiln,
      reference.cases.map((c) => c.prompt_ids),
      { greedy: true, maxNewTokens: reference.steps, tokenizer, stopTokenIds: [] },
    );
    // node-llama-cpp's model.tokenize (not in the structural type kiln uses for policies).
    const nlc = model as unknown as { tokenize(text: string, special?: boolean): number[] };
    for (const [i, c] of reference.cases.entries()) {
      const ctx = await model.createContext({ contextSize: 128, threads: 1 });
      const seq = ctx.getSequence();
      const out: number[] = [];
      for await (const t of seq.evaluate(c.prompt_ids, { temperature: 0 })) {
        out.push(t);
        if (out.length === reference.steps) break;
      }
      await ctx.dispose();
      expect(out, JSON.stringify(c.prompt)).toEqual(c.greedy_ids);
      expect(kilnOuts[i].tokenIds, JSON.stringify(c.prompt)).toEqual(c.greedy_ids);
      expect([1, ...nlc.tokenize(c.prompt, false)]).toEqual(c.prompt_ids);
    }
    await model.dispose();
  });

  it("loadModel(.gguf) gives the same model back: config, tokenizer and logits bit for bit", async () => {
    await ready;
    const fromHf = await loadModel(hfDir);
    const fromGguf = await loadModel(ggufPath);
    expect((await loadConfig(ggufPath)).numKvHeads).toBe(4);
    const ids = [reference.cases[1].prompt_ids];
    const a = fromHf.forward(ids).toFloat32Array();
    const b = fromGguf.forward(ids).toFloat32Array();
    expect(Buffer.from(b.buffer).equals(Buffer.from(a.buffer))).toBe(true);
    const t1 = await loadTokenizer(hfDir);
    const t2 = await loadTokenizer(ggufPath);
    const text = "Once upon a time, Lily saw a big red ball.";
    expect(t2.encode(text)).toEqual(t1.encode(text));
  });
});
