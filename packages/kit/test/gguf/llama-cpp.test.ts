// The embedded agent model (Qwen3, BPE) and LoRA adapters exported to GGUF and run in llama.cpp
// (node-llama-cpp's prebuilt CPU build), against kiln on the same weights:
// - greedy tokens equal, next-token log-probs within 1e-4 (every token with p > 1e-6; llama.cpp's
//   f32 CPU kernels sum in another order: measured worst 4.5e-6 on the first prompt);
// - an adapter exported as a GGUF LoRA, applied at scale 1 in llama.cpp = kiln's merge of it;
// - LlamaCppPolicy plays the same GuessNumber episodes as LocalPolicy at temperature 0, and swaps
//   adapters between rounds without reloading the base.
// Where node-llama-cpp does not load, the suite says so in one line and is skipped;
// KILN_LLAMA_CPP=required (set by `npm test` where it loads) makes that a failure.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportAdapterToGguf, exportModelToGguf, writeRepoFiles } from "@kiln/hub-io";
import { attachLora, mergeAdapter, saveAdapter } from "@kiln/lora";
import {
  ChatTemplate,
  type LlamaCppHandle,
  LlamaCppPolicy,
  LocalPolicy,
  type Model,
  type Tokenizer,
  generate,
  loadLlamaCpp,
  loadStories260K,
  loadModel,
  loadTokenizer,
} from "@kiln/models";
import { GuessNumberEnv, runEpisode, trajectoryMessages } from "@kiln/rollout";
import { noGrad } from "@kiln/tensor";
import { afterAll, describe, expect, it } from "vitest";
import { agentModelDir } from "../../src/agent-model/paths.js";
import { type RolloutEngine, llamaCppRollouts } from "../../src/llama-cpp-rollouts.js";
import { scaffoldedTeacher } from "../../src/recipes/opd-samples.js";
import { runOpdRounds } from "../../src/recipes/opd.js";
import { opdTinyConfig } from "../../src/recipes/presets.js";

const required = process.env.KILN_LLAMA_CPP === "required";
let llama: LlamaCppHandle | undefined;
let unavailable: string | null = null;
try {
  llama = await loadLlamaCpp();
} catch (e) {
  unavailable = (e as Error).message;
}
if (unavailable) process.stderr.write(`llama.cpp tests skipped: ${unavailable}\n`);

const tmp = mkdtempSync(join(tmpdir(), "kiln-gguf-llama-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const agentDir = agentModelDir();
const LOGPROB_TOLERANCE = 1e-4;
const STEPS = 24;

const PROMPTS = [
  [{ role: "user" as const, content: "Guess a number between 1 and 100." }],
  [
    { role: "system" as const, content: "You play questworld. Use the tools." },
    { role: "user" as const, content: "You are in the village. Gather timber for the Healer." },
  ],
  [{ role: "user" as const, content: "Once upon a time, there was a little dog." }],
];

async function promptIds(tokenizer: Tokenizer): Promise<number[][]> {
  const template = ChatTemplate.fromTokenizer(tokenizer);
  return PROMPTS.map((m) => tokenizer.encode(template.render(m, { addGenerationPrompt: true })));
}

function logSoftmax(logits: Float32Array): Float64Array {
  let max = Number.NEGATIVE_INFINITY;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (v) => v - lse);
}

type NlcModel = Awaited<ReturnType<LlamaCppHandle["loadModel"]>>;
interface ControlledSeq {
  controlledEvaluate(input: unknown[]): Promise<({ next: { probabilities?: Map<number, number> } } | undefined)[]>;
}

/** llama.cpp's greedy continuation and its next-token probabilities after the prompt. */
async function llamaCppRun(
  model: NlcModel,
  ids: number[],
  lora?: string,
): Promise<{ greedy: number[]; probs: Map<number, number> }> {
  // F32 KV cache and no flash attention: llama.cpp's defaults (F16 cache; flash attention, which
  // computes in f16 on the CPU) move log-probs by ~3e-3 here; with these they agree to ~5e-6.
  const kv = { experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", flashAttention: false };
  const opts = {
    contextSize: 256,
    threads: 1,
    ...kv,
    ...(lora ? { lora: { adapters: [{ filePath: lora, scale: 1 }] } } : {}),
  };
  const ctx = await model.createContext(opts);
  const seq = ctx.getSequence();
  const greedy: number[] = [];
  for await (const t of seq.evaluate(ids, { temperature: 0 })) {
    greedy.push(t);
    if (greedy.length === STEPS) break;
  }
  await seq.clearHistory();
  const input: unknown[] = ids.map((t, i) =>
    i === ids.length - 1
      ? [t, { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } }]
      : t,
  );
  const res = await (seq as unknown as ControlledSeq).controlledEvaluate(input);
  await ctx.dispose();
  return { greedy, probs: res[ids.length - 1]?.next.probabilities ?? new Map() };
}

function kilnRun(model: Model, ids: number[]): { greedy: number[]; logprobs: Float64Array; gap: number } {
  const [out] = generate(model, [ids], { greedy: true, maxNewTokens: STEPS, stopTokenIds: [] });
  const logits = noGrad(() => model.forward([ids], { logitsToKeep: 1 })).toFloat32Array();
  const sorted = [...logits].sort((a, b) => b - a);
  return { greedy: out.tokenIds, logprobs: logSoftmax(logits), gap: sorted[0] - sorted[1] };
}

/**
 * kiln's greedy tokens up to llama.cpp's stop: llama.cpp's evaluate ends at an end-of-generation token
 * (and does not yield it), while kilnRun generates through it.
 */
function untilEog(model: NlcModel, greedy: number[]): number[] {
  const eog = greedy.findIndex((t) => (model as unknown as { isEogToken(t: number): boolean }).isEogToken(t));
  const kept = eog < 0 ? greedy : greedy.slice(0, eog);
  expect(kept.length).toBeGreaterThan(0);
  return kept;
}

function expectClose(probs: Map<number, number>, logprobs: Float64Array): void {
  expect(probs.size).toBe(logprobs.length);
  let worst = 0;
  for (const [t, p] of probs) if (p > 1e-6) worst = Math.max(worst, Math.abs(Math.log(p) - logprobs[t]));
  expect(worst).toBeLessThan(LOGPROB_TOLERANCE);
}

describe("llama.cpp availability (kit)", () => {
  it.runIf(required)("node-llama-cpp loads (KILN_LLAMA_CPP=required)", () => {
    expect(unavailable).toBeNull();
  });
  it.skipIf(unavailable === null)(`llama.cpp unavailable here: ${unavailable ?? ""}`, () => {});
});

describe.skipIf(unavailable !== null)("the embedded agent model in llama.cpp", () => {
  const ggufPath = join(tmp, "agent.gguf");
  const exported = exportModelToGguf(agentDir, ggufPath, { dtype: "f32" });

  it("tokenises the chat prompts as kiln does, and greedy tokens and log-probs agree", async () => {
    await exported;
    const tokenizer = await loadTokenizer(agentDir);
    const kiln = await loadModel(agentDir);
    const model = await (llama as LlamaCppHandle).loadModel({ modelPath: ggufPath, gpuLayers: 0 });
    const nlc = model as unknown as { tokenize(text: string, special?: boolean): number[] };
    const template = ChatTemplate.fromTokenizer(tokenizer);
    for (const [i, ids] of (await promptIds(tokenizer)).entries()) {
      const text = template.render(PROMPTS[i], { addGenerationPrompt: true });
      expect(nlc.tokenize(text, true)).toEqual(ids);
      const k = kilnRun(kiln, ids);
      const l = await llamaCppRun(model, ids);
      expect(l.greedy, `prompt ${i}`).toEqual(untilEog(model, k.greedy));
      expectClose(l.probs, k.logprobs);
    }
    await model.dispose();
  });

  it("a LoRA adapter exported as GGUF LoRA, at scale 1 in llama.cpp, = kiln's merge of it", async () => {
    await exported;
    const tokenizer = await loadTokenizer(agentDir);
    const kiln = await loadModel(agentDir);
    const adapter = attachLora(kiln, {
      r: 4,
      alpha: 8,
      init: false,
      seed: 7,
      targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    });
    // init: false draws B as well; shrink it so the adapter moves the model without swamping it.
    for (const l of adapter.layers.values()) l.scaleMultiplier = 0.05;
    const adapterDir = join(tmp, "agent-lora");
    await saveAdapter(adapter, adapterDir);
    const loraPath = join(tmp, "agent-lora.gguf");
    await exportAdapterToGguf(adapterDir, loraPath, { baseDir: agentDir });
    mergeAdapter(adapter);
    const base = await loadModel(agentDir);
    const model = await (llama as LlamaCppHandle).loadModel({ modelPath: ggufPath, gpuLayers: 0 });
    let moved = 0;
    for (const ids of await promptIds(tokenizer)) {
      const merged = kilnRun(kiln, ids);
      const l = await llamaCppRun(model, ids, loraPath);
      expect(l.greedy).toEqual(untilEog(model, merged.greedy));
      expectClose(l.probs, merged.logprobs);
      const before = kilnRun(base, ids).logprobs;
      for (let t = 0; t < before.length; t++) moved = Math.max(moved, Math.abs(before[t] - merged.logprobs[t]));
    }
    // The adapter moves the log-probs far more than the tolerance (so the agreement is about the adapter).
    expect(moved).toBeGreaterThan(100 * LOGPROB_TOLERANCE);
    await model.dispose();
  });

  it("LlamaCppPolicy plays the same GuessNumber episodes as LocalPolicy at temperature 0, and swaps adapters without reloading", async () => {
    await exported;
    const tokenizer = await loadTokenizer(agentDir);
    const local = new LocalPolicy({ model: await loadModel(agentDir), tokenizer });
    const remote = await LlamaCppPolicy.load({ modelPath: ggufPath, tokenizer, contextSize: 1024 });
    const params = { temperature: 0, maxTokens: 48 };
    const limits = { maxTurns: 3 };
    const play = async (policy: LocalPolicy | LlamaCppPolicy, seed: number) =>
      trajectoryMessages(await runEpisode({ env: new GuessNumberEnv(), policy, seed, params, limits }));
    expect(await play(remote, 1)).toEqual(await play(local, 1));
    // Round 2: an adapter arrives; llama.cpp applies it on the loaded base, kiln merges it.
    const kiln = await loadModel(agentDir);
    const adapter = attachLora(kiln, {
      r: 4,
      alpha: 8,
      init: false,
      seed: 3,
      targetModules: ["q_proj", "v_proj", "up_proj"],
    });
    for (const l of adapter.layers.values()) l.scaleMultiplier = 0.05;
    await saveAdapter(adapter, join(tmp, "round2"));
    await exportAdapterToGguf(join(tmp, "round2"), join(tmp, "round2.gguf"), { baseDir: agentDir });
    mergeAdapter(adapter);
    await remote.setAdapter({ path: join(tmp, "round2.gguf") });
    const merged = new LocalPolicy({ model: kiln, tokenizer });
    expect(await play(remote, 1)).toEqual(await play(merged, 1));
    expect(remote.contextsCreated).toBe(2);
    await remote.dispose();
  }, 600_000);
});

describe.skipIf(unavailable !== null)("a LoRA on Llama's q/k in llama.cpp (stories260K)", () => {
  it("lora_b rows go to Meta's RoPE order with the base's: llama.cpp at scale 1 = kiln's merge", async () => {
    const { files } = await loadStories260K();
    const dir = join(tmp, "stories260K");
    await writeRepoFiles(dir, new Map(files));
    const gguf = join(tmp, "stories260K.gguf");
    await exportModelToGguf(dir, gguf);
    const kiln = await loadModel(dir);
    const adapter = attachLora(kiln, { r: 4, alpha: 4, init: false, seed: 11, targetModules: ["q_proj", "k_proj"] });
    for (const l of adapter.layers.values()) l.scaleMultiplier = 0.2;
    await saveAdapter(adapter, join(tmp, "stories-lora"));
    const lora = join(tmp, "stories-lora.gguf");
    await exportAdapterToGguf(join(tmp, "stories-lora"), lora, { baseDir: dir });
    mergeAdapter(adapter);
    const base = await loadModel(dir);
    const model = await (llama as LlamaCppHandle).loadModel({ modelPath: gguf, gpuLayers: 0 });
    const ids = [1, 403, 407, 261, 378]; // "Once upon a time" (run.c's ids)
    const merged = kilnRun(kiln, ids);
    const l = await llamaCppRun(model, ids, lora);
    expect(l.greedy).toEqual(merged.greedy);
    expectClose(l.probs, merged.logprobs);
    const before = kilnRun(base, ids).logprobs;
    let moved = 0;
    for (let t = 0; t < before.length; t++) moved = Math.max(moved, Math.abs(before[t] - merged.logprobs[t]));
    expect(moved).toBeGreaterThan(100 * LOGPROB_TOLERANCE);
    await model.dispose();
  });
});

describe.skipIf(unavailable !== null)("OPD rounds with rollouts on llama.cpp (the embedded agent model)", () => {
  it("every rollout turn equals kiln's student's at temperature 0 (round 2 with round 1's GGUF LoRA on the loaded base), log-probs kiln's", async () => {
    const tokenizer = await loadTokenizer(agentDir);
    const model = await loadModel(agentDir);
    const engine = llamaCppRollouts({ baseDir: agentDir, workDir: join(tmp, "opd-gguf") });
    const turns: { round: number; adapters: number; same: boolean; worst: number }[] = [];
    // Each turn llama.cpp plays is also generated by kiln's student on the same conversation.
    const checked: RolloutEngine = {
      name: engine.name,
      async policy(input) {
        const p = await engine.policy(input);
        const adapters = (p as LlamaCppPolicy).activeAdapters.length;
        return {
          id: p.id,
          async generate(messages, tools, params) {
            const a = await p.generate(messages, tools, params);
            const b = await input.student.generate(messages, tools, params);
            let worst = 0;
            for (const [i, l] of (b.logprobs ?? []).entries())
              worst = Math.max(worst, Math.abs(l.logprob - (a.logprobs?.[i]?.logprob ?? Number.NaN)));
            const same = JSON.stringify(a.completionTokenIds) === JSON.stringify(b.completionTokenIds);
            turns.push({ round: input.round, adapters, same, worst });
            return a;
          },
        };
      },
      dispose: () => engine.dispose(),
    };
    const config = opdTinyConfig();
    Object.assign(config, {
      rounds: 2,
      episodesPerRound: 2,
      rollout: { temperature: 0, maxTokens: 32, maxTurns: 2 },
    });
    Object.assign(config.train, { maxSteps: 2, microBatchSize: 2, gradAccum: 1, checkpointEvery: 2, lr: 2e-3 });
    const res = await runOpdRounds({
      model,
      codec: { tokenizer, template: ChatTemplate.fromTokenizer(tokenizer) },
      makeEnv: () => new GuessNumberEnv(),
      teacher: (student) => scaffoldedTeacher(student, "Hint: bisect the range and call guess."),
      evaluate: async () => ({ scores: { a: 0, b: 0, c: 0 } }),
      config,
      baseModel: { source: agentDir, dir: agentDir },
      rolloutEngine: checked,
      out: join(tmp, "opd-runs"),
      name: "opd-llama",
      progress: false,
      log: () => {},
    });
    await checked.dispose();
    expect(res.rounds.length).toBe(2);
    expect(turns.filter((t) => t.round === 1).every((t) => t.adapters === 0)).toBe(true);
    expect(turns.filter((t) => t.round === 2).every((t) => t.adapters === 1)).toBe(true);
    expect(turns.filter((t) => t.round === 2).length).toBeGreaterThan(0);
    expect(turns.every((t) => t.same)).toBe(true);
    expect(Math.max(...turns.map((t) => t.worst))).toBeLessThan(1e-3);
    // One llama.cpp model for both rounds: round 2's adapter went onto the loaded base.
    expect(engine.policyLoads).toBe(1);
  }, 900_000);
});
