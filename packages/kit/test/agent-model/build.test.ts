import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChatTemplate, LocalPolicy, loadModel, loadTokenizer } from "@kiln/models";
import { GuessNumberEnv, mulberry32, runEpisodes } from "@kiln/rollout";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AgentModelBuildError,
  type BuildAgentModelOptions,
  type Row,
  buildAgentModel,
  stepBatches,
} from "../../src/agent-model/build.js";

const root = mkdtempSync(join(tmpdir(), "kiln-agent-model-"));

beforeAll(async () => {
  await initBackend("wasm");
});

afterAll(() => {
  setBackend("js");
  disposeWasmBackend();
  rmSync(root, { recursive: true, force: true });
});

const tiny = (outDir: string, seed: number, options: Partial<BuildAgentModelOptions> = {}) =>
  buildAgentModel({
    outDir,
    seed,
    steps: 3,
    batchSize: 4,
    guessNumberEpisodes: 12,
    stories: 3,
    heldoutStories: 2,
    size: { hiddenSize: 32, layers: 1, heads: 2, kvHeads: 1, vocabSize: 160 },
    log: () => {},
    progress: false,
    ...options,
  });

describe("buildAgentModel", () => {
  it("writes a loadable Hugging Face directory, byte-identical for the same seed, that plays through LocalPolicy", async () => {
    const a = await tiny(join(root, "a"), 3);
    const b = await tiny(join(root, "b"), 3);
    const c = await tiny(join(root, "c"), 4);
    const bytes = (d: string, f: string) => readFileSync(join(d, f));
    for (const f of ["model.safetensors", "tokenizer.json", "config.json", "heldout.txt"])
      expect(bytes(a.dir, f).equals(bytes(b.dir, f))).toBe(true);
    expect(bytes(a.dir, "model.safetensors").equals(bytes(c.dir, "model.safetensors"))).toBe(false);
    expect(a.lossLast).toBeLessThan(a.lossFirst);
    expect(a.parameters).toBeGreaterThan(0);
    expect(Number.isFinite(a.heldoutPerplexity)).toBe(true);

    const model = await loadModel(a.dir);
    const tokenizer = await loadTokenizer(a.dir);
    expect(tokenizer.chatTemplate).toContain("<|im_start|>");
    const policy = new LocalPolicy({
      id: "tiny-agent",
      model,
      tokenizer,
      chatTemplate: ChatTemplate.fromTokenizer(tokenizer),
    });
    const r = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy,
      episodes: 1,
      params: { maxTokens: 8, temperature: 0 },
      limits: { maxTurns: 2 },
      concurrency: 1,
    });
    expect(r.trajectories[0].turns.length).toBeGreaterThan(0);
  }, 120_000);

  it("trains the copy warm-up's steps on the warm-up rows alone, then on every row", () => {
    const row = (id: number, length: number): Row => ({
      ids: new Int32Array(length).fill(id),
      mask: new Uint8Array(length).fill(1),
      fullLength: length,
    });
    const copy = [row(1, 30), row(2, 50), row(3, 40)];
    const rows = [row(7, 60), copy[0], row(8, 20), copy[1], row(9, 70), copy[2]];
    const batches = stepBatches(rows, copy, 5, 1, 64, mulberry32(3));
    const seen = Array.from({ length: 25 }, () => batches.next().value.flat());
    for (const step of seen.slice(0, 5)) for (const r of step) expect(copy).toContain(r);
    const after = new Set(seen.slice(5).flat());
    for (const r of rows) expect(after.has(r)).toBe(true);
  });

  it("refuses a copy warm-up without copy drills, or as long as the build, before training", async () => {
    const build = (copyWarmupSteps: number) => tiny(join(root, "w"), 1, { copyWarmupSteps });
    await expect(build(2)).rejects.toThrow(/needs copy drills in the corpus/);
    await expect(build(3)).rejects.toThrow(AgentModelBuildError);
  });
});
