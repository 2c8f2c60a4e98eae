import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChatTemplate, LocalPolicy, loadModel, loadTokenizer } from "@kiln/models";
import { GuessNumberEnv, mulberry32, runEpisodes } from "@kiln/rollout";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AgentModelBuildError,
  buildClock,
  AgentModelBuildInterrupted,
  type BuildAgentModelOptions,
  type Row,
  buildAgentModel,
  stepBatches,
} from "../../src/agent-model/build.js";
import {
  AgentModelCheckpointError,
  agentModelCheckpointDir,
  readBuildCheckpoint,
} from "../../src/agent-model/checkpoint.js";

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

  it("refuses training rows longer than the model's positions", async () => {
    await expect(tiny(join(root, "long"), 1, { maxLength: 4096 })).rejects.toThrow(
      /maxLength must be an integer from 2 to 2048, got 4096/,
    );
    expect(existsSync(join(root, "long"))).toBe(false);
  });
});

describe("buildAgentModel checkpoints", () => {
  // Long enough for a few checkpoints; short rows keep it quick.
  const longer = (outDir: string, options: Partial<BuildAgentModelOptions> = {}) =>
    tiny(outDir, 5, { steps: 130, maxLength: 128, checkpointEvery: 40, ...options });
  /** A build killed at its step-100 log line: the step-80 checkpoint is the last one it wrote. */
  const interrupted = (outDir: string, options: Partial<BuildAgentModelOptions> = {}) =>
    longer(outDir, {
      ...options,
      log: (line) => {
        if (line.includes("step 100/")) throw new Error("killed");
      },
    });
  const bytes = (d: string, f: string) => readFileSync(join(d, f));
  let uninterrupted: Promise<{ dir: string; lossFirst: number; lossLast: number }> | undefined;
  /** The same build run through once (made once, shared by the tests). */
  const wholeBuild = () => {
    uninterrupted ??= longer(join(root, "whole"));
    return uninterrupted;
  };

  it("resumes an interrupted build to the bytes an uninterrupted one writes, and removes its checkpoint", async () => {
    const whole = await wholeBuild();
    expect(existsSync(agentModelCheckpointDir(whole.dir))).toBe(false);

    const out = join(root, "resumed");
    await expect(interrupted(out)).rejects.toThrow("killed");
    expect(existsSync(out)).toBe(false);
    const state = readBuildCheckpoint(agentModelCheckpointDir(out));
    expect(state?.step).toBe(80);
    expect(state?.settings.steps).toBe(130);

    const lines: string[] = [];
    const resumed = await longer(out, { resume: true, log: (line) => lines.push(line) });
    expect(lines.some((l) => l.includes("resumed from") && l.includes("at step 80/130"))).toBe(true);
    // Progress lines say how long the resumed part took and what is left, from its own steps.
    expect(lines).toContainEqual(
      expect.stringMatching(/step 100\/130 loss [\d.]+ \(\d+ (s|min) in, about \d+ (s|min) left\)$/),
    );
    expect(lines).toContainEqual(expect.stringMatching(/step 130\/130 loss [\d.]+ \(\d+ (s|min)\)$/));
    for (const f of ["model.safetensors", "tokenizer.json", "config.json", "README.md", "heldout.txt"])
      expect(bytes(resumed.dir, f).equals(bytes(whole.dir, f)), f).toBe(true);
    expect(resumed.lossFirst).toBe(whole.lossFirst);
    expect(resumed.lossLast).toBe(whole.lossLast);
    expect(existsSync(agentModelCheckpointDir(out))).toBe(false);
  }, 240_000);

  it("stops on its signal after the step in flight, checkpoints it, and resumes from there to the same bytes", async () => {
    const whole = (await wholeBuild()).dir;
    const out = join(root, "stopped");
    const controller = new AbortController();
    let started = -1;
    const stopped = await longer(out, {
      signal: controller.signal,
      onTrainingStart: (from) => {
        started = from;
      },
      log: (line) => {
        if (line.includes("step 100/")) controller.abort();
      },
    }).catch((err: unknown) => err);
    expect(started).toBe(0);
    expect(stopped).toBeInstanceOf(AgentModelBuildInterrupted);
    const interrupted = stopped as AgentModelBuildInterrupted;
    expect(interrupted.step).toBe(100);
    expect(interrupted.checkpoint).toEqual({ dir: agentModelCheckpointDir(out), step: 100 });
    expect(interrupted.message).toContain("interrupted after step 100; the checkpoint in");
    const resumed = await longer(out, {
      resume: true,
      onTrainingStart: (from) => {
        started = from;
      },
    });
    expect(started).toBe(100);
    expect(bytes(resumed.dir, "model.safetensors").equals(bytes(whole, "model.safetensors"))).toBe(true);
  }, 240_000);

  it("never overwrites a checkpoint unasked, and resumes only what made it", async () => {
    const out = join(root, "guarded");
    await expect(longer(out, { resume: true })).rejects.toThrow(/cannot resume: there is no checkpoint at/);
    await expect(interrupted(out)).rejects.toThrow("killed");
    // A fresh build over it is refused before the corpus is made.
    const fresh = longer(out);
    await expect(fresh).rejects.toThrow(AgentModelCheckpointError);
    await expect(fresh).rejects.toThrow(/holds an unfinished build \(step 80 of 130\): --resume continues it/);
    await expect(longer(out, { resume: true, steps: 140 })).rejects.toThrow(/steps 130 there, 140 here/);
    await expect(longer(out, { resume: true, lr: 1e-3 })).rejects.toThrow(/lr 0.003 there, 0.001 here/);
    await expect(longer(out, { resume: true, guessNumberEpisodes: 14 })).rejects.toThrow(/its corpus differs/);
    // The refusals left it as it was.
    expect(readBuildCheckpoint(agentModelCheckpointDir(out))?.step).toBe(80);
    // Steps run on another BLAS kernel round differently: allowed, and said.
    const statePath = join(agentModelCheckpointDir(out), "state.json");
    const state = JSON.parse(readFileSync(statePath, "utf8"));
    expect(state.blas).toBeNull(); // wasm
    writeFileSync(statePath, JSON.stringify({ ...state, blas: "libopenblas.so.0 core Zen" }));
    const lines: string[] = [];
    await longer(out, { resume: true, log: (line) => lines.push(line) });
    expect(lines).toContain(
      "[agent-model] note: the checkpoint's steps ran on libopenblas.so.0 core Zen, these run on no BLAS: the model will equal no uninterrupted build bit for bit",
    );
  }, 240_000);
});

describe("buildClock", () => {
  it("says the time spent and what is left at the recent pace, one slow stretch moving it only for a moment", () => {
    let t = 0;
    const clock = buildClock(0, () => t);
    const line = (minutes: number, done: number, left: number) => {
      t += minutes * 60_000;
      return clock(done, left);
    };
    expect(line(1, 50, 500)).toBe("1 min in, about 10 min left");
    expect(line(1, 100, 450)).toBe("2 min in, about 9 min left");
    expect(line(1, 150, 400)).toBe("3 min in, about 8 min left");
    // Suspended for half an hour: the median of the recent paces holds.
    expect(line(31, 200, 350)).toBe("34 min in, about 7 min left");
    expect(line(1, 250, 300)).toBe("35 min in, about 6 min left");
    expect(line(0.5, 300, 0)).toBe("36 min");
    expect(buildClock(0, () => 12_000)(5, 5)).toBe("12 s in, about 12 s left");
  });
});
