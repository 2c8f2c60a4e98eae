// The objectives' chunked-head forward against a direct full-logits computation (same loss and
// gradients), and the memory it saves: a step on a large vocabulary never allocates [T, V].
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distillationLoss, dpoLossFromLogits, sftLoss } from "@kiln/losses";
import { type LoraAdapter, attachLora } from "@kiln/lora";
import { type Model, createModel, loadModel } from "@kiln/models";
import { Tensor, backward, noGrad, reshape } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  type Conversation,
  type PreferenceExample,
  conversationBatch,
  preferenceBatch,
} from "../../src/trainer/chat-batches.js";
import { writeMergedModel } from "../../src/artifacts.js";
import type { ConsolidationSample } from "../../src/trainer/objectives/index.js";
import type { OpdSample } from "../../src/recipes/opd-samples.js";
import {
  arpSeedConfig,
  arpTinyConfig,
  checkBaseDtype,
  oelSeedConfig,
  oelTinyConfig,
  opdSeedConfig,
  opdTinyConfig,
  setConfigValue,
  stageForward,
} from "../../src/recipes/presets.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
import {
  consolidationObjective,
  dpoObjective,
  opdObjective,
  sftObjective,
} from "../../src/trainer/objectives/index.js";
import type { Objective } from "../../src/trainer/trainer.js";
import { train } from "../../src/trainer/trainer.js";

function randomAdapter(model: Model, seed: number): LoraAdapter {
  const adapter = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear", seed });
  // B starts at zero; fresh values make the adapter-on and adapter-off models differ.
  for (const [, p] of adapter.namedParameters()) {
    const v = p.f32Sync();
    for (let i = 0; i < v.length; i++) v[i] = Math.sin(i * 1.7 + seed) * 0.08;
  }
  return adapter;
}

/** Loss and adapter gradients of one backward. */
function lossAndGrads(adapter: LoraAdapter, run: () => Tensor): { loss: number; grads: Float32Array[] } {
  for (const p of adapter.parameters()) p.grad = null;
  const loss = run();
  backward(loss);
  const grads = adapter.parameters().map((p) => Float32Array.from((p.grad as Tensor).toFloat32Array()));
  return { loss: loss.item(), grads };
}

function expectClose(a: { loss: number; grads: Float32Array[] }, b: { loss: number; grads: Float32Array[] }) {
  expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-5 * Math.max(1, Math.abs(b.loss)));
  let scale = 0;
  let diff = 0;
  let nonzero = 0;
  a.grads.forEach((g, i) => {
    for (let j = 0; j < g.length; j++) {
      scale = Math.max(scale, Math.abs(b.grads[i][j]));
      diff = Math.max(diff, Math.abs(g[j] - b.grads[i][j]));
      if (b.grads[i][j] !== 0) nonzero++;
    }
  });
  expect(nonzero).toBeGreaterThan(0);
  expect(diff).toBeLessThan(1e-4 * scale);
}

const conversations: Conversation[] = [
  {
    messages: [
      { role: "user", content: "Guess a number between 1 and 9." },
      { role: "assistant", content: "Is it 5?" },
      { role: "user", content: "Higher." },
      { role: "assistant", content: "Then 7." },
    ],
  },
  {
    messages: [
      { role: "user", content: "Say hi." },
      { role: "assistant", content: "hi there" },
    ],
  },
];

const preferences: PreferenceExample[] = [
  {
    prompt: [{ role: "user", content: "Pick a colour." }],
    chosen: { role: "assistant", content: "blue" },
    rejected: { role: "assistant", content: "no." },
  },
  {
    prompt: [{ role: "user", content: "Two plus two?" }],
    chosen: { role: "assistant", content: "four" },
    rejected: { role: "assistant", content: "five, surely" },
  },
];

function randomIds(n: number, vocab: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => (((i + 1) * 7919 + seed * 104729) % (vocab - 1)) + 1);
}

describe("objectives on the chunked head", () => {
  it("SFT: loss and gradients equal a full-logits sftLoss (head chunks of 5 rows)", () => {
    const chat = tinyChat({ seed: 4, std: 0.2 });
    const codec = { tokenizer: chat.tokenizer, template: chat.chatTemplate };
    const adapter = randomAdapter(chat.model, 1);
    const objective = sftObjective(chat.model, codec, { headChunkRows: 5, maxLength: 120 });
    const stepItems = objective.items(conversations) * 2;
    const chunked = lossAndGrads(adapter, () => objective.loss(conversations, stepItems).loss);
    const full = lossAndGrads(adapter, () => {
      const b = conversationBatch(codec, conversations, 120);
      const logits = chat.model.forward(b.inputIds, { attentionMask: b.attentionMask });
      expect(logits.shape[2]).toBe(chat.model.config.vocabSize);
      return sftLoss(logits, b.labels, { numItemsInBatch: stepItems }).loss;
    });
    expectClose(chunked, full);
  });

  it("DPO: loss and gradients equal dpoLossFromLogits on full policy and reference logits", () => {
    const chat = tinyChat({ seed: 5, std: 0.2 });
    const codec = { tokenizer: chat.tokenizer, template: chat.chatTemplate };
    const adapter = randomAdapter(chat.model, 2);
    const objective = dpoObjective(chat.model, adapter, codec, { beta: 0.3, headChunkRows: 7, maxLength: 80 });
    const chunked = lossAndGrads(adapter, () => objective.loss(preferences, preferences.length).loss);
    const full = lossAndGrads(adapter, () => {
      const batch = preferenceBatch(codec, preferences, 80);
      const attentionMask = batch.attentionMask;
      return dpoLossFromLogits(
        {
          policyLogits: chat.model.forward(batch.inputIds, { attentionMask }),
          inputIds: batch.inputIds,
          completionMask: batch.completionMask,
          reference: {
            logits: () =>
              adapter.withDisabled(() => noGrad(() => chat.model.forward(batch.inputIds, { attentionMask }))),
          },
        },
        { beta: 0.3 },
      ).loss;
    });
    expect(chunked.loss).not.toBeCloseTo(Math.log(2), 4); // the adapter moved the policy off the reference
    expectClose(chunked, full);
  });

  it("self-distillation: loss and gradients equal distillationLoss on full student and teacher logits", () => {
    const chat = tinyChat({ seed: 6, std: 0.2 });
    const V = chat.model.config.vocabSize;
    const adapter = randomAdapter(chat.model, 3);
    const samples: ConsolidationSample[] = [
      {
        episodeId: "a",
        turn: 0,
        studentPromptIds: randomIds(6, V, 1),
        teacherPromptIds: randomIds(11, V, 2),
        completionIds: randomIds(9, V, 3),
      },
      {
        episodeId: "b",
        turn: 1,
        studentPromptIds: randomIds(4, V, 4),
        teacherPromptIds: randomIds(13, V, 5),
        completionIds: randomIds(5, V, 6),
      },
    ];
    const N = 14;
    for (const kind of ["forward_kl", "jsd"] as const) {
      const objective = consolidationObjective(chat.model, adapter, { kind, beta: 0.4, headChunkRows: 4 });
      expect(objective.items(samples)).toBe(N);
      const chunked = lossAndGrads(adapter, () => objective.loss(samples, N).loss);
      const full = lossAndGrads(adapter, () => {
        const pad = (rows: number[][]) => {
          const T = Math.max(...rows.map((r) => r.length));
          const ids = new Int32Array(rows.length * T);
          const mask = new Int32Array(rows.length * T);
          rows.forEach((r, b) => {
            ids.set(r, b * T);
            mask.fill(1, b * T, b * T + r.length);
          });
          return { T, ids, mask };
        };
        const s = pad(samples.map((x) => [...x.studentPromptIds, ...x.completionIds]));
        const t = pad(samples.map((x) => [...x.teacherPromptIds, ...x.completionIds]));
        const student = chat.model.forward(new Tensor(s.ids, [2, s.T], "i32"), {
          attentionMask: new Tensor(s.mask, [2, s.T], "i32"),
        });
        const teacher = adapter.withDisabled(() =>
          noGrad(() =>
            chat.model.forward(new Tensor(t.ids, [2, t.T], "i32"), {
              attentionMask: new Tensor(t.mask, [2, t.T], "i32"),
            }),
          ),
        );
        const mask = new Uint8Array(2 * s.T);
        const teacherRows = new Int32Array(2 * s.T);
        samples.forEach((x, b) => {
          for (let j = 0; j < x.completionIds.length; j++) {
            const r = b * s.T + x.studentPromptIds.length + j - 1;
            mask[r] = 1;
            teacherRows[r] = b * t.T + x.teacherPromptIds.length + j - 1;
          }
        });
        return distillationLoss(reshape(student, [2 * s.T, V]), reshape(teacher, [2 * t.T, V]), {
          kind,
          beta: 0.4,
          mask,
          teacherRows,
        }).loss;
      });
      expect(chunked.loss).toBeGreaterThan(1e-4);
      expectClose(chunked, full);
    }
  });
});

describe("recipe settings", () => {
  it("a bf16 base (baseDtype) trains through the chunked head with checkpointLayers, like the same weights in f32", async () => {
    const chat = tinyChat({ seed: 8, std: 0.2 });
    const dir = mkdtempSync(join(tmpdir(), "kiln-bf16-base-"));
    try {
      await writeMergedModel(dir, chat.model, {
        tokenizer: chat.tokenizer,
        template: chat.chatTemplate,
        dtype: "bf16",
        baseModel: "tinyChat",
        title: "bf16 base",
      });
      const codec = { tokenizer: chat.tokenizer, template: chat.chatTemplate };
      const run = async (dtype: "f32" | "bf16", forward: { checkpointLayers: boolean; headChunkRows: number }) => {
        const model = await loadModel(dir, { dtype });
        const adapter = randomAdapter(model, 9);
        const objective = sftObjective(model, codec, { maxLength: 100, ...forward });
        const out = lossAndGrads(adapter, () => objective.loss(conversations, objective.items(conversations)).loss);
        return { model, out };
      };
      const bf16 = await run("bf16", { checkpointLayers: true, headChunkRows: 3 });
      expect(bf16.model.layers.length).toBeGreaterThan(0);
      expect(bf16.model.embedTokens.dtype).toBe("bf16");
      const f32 = await run("f32", { checkpointLayers: false, headChunkRows: 1000 });
      expect(f32.model.embedTokens.dtype).toBe("f32");
      expectClose(bf16.out, f32.out);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("maxLength cuts SFT rows on either side and DPO rows at the start, through renderForTraining", () => {
    const chat = tinyChat({ seed: 1 });
    const codec = { tokenizer: chat.tokenizer, template: chat.chatTemplate };
    const full = conversationBatch(codec, [conversations[0]]);
    const ids = Array.from(full.inputIds.dataSync());
    expect(ids.length).toBeGreaterThan(20);
    const right = conversationBatch(codec, [conversations[0]], 20);
    const left = conversationBatch(codec, [conversations[0]], 20, "left");
    expect(Array.from(right.inputIds.dataSync())).toEqual(ids.slice(0, 20));
    expect(Array.from(left.inputIds.dataSync())).toEqual(ids.slice(-20));
    // Left truncation keeps the last assistant reply, so its labels still score tokens.
    expect(Array.from(left.labels.dataSync()).some((t) => t !== -100)).toBe(true);
    const pairs = preferenceBatch(codec, [preferences[0]]);
    const cut = preferenceBatch(codec, [preferences[0]], 12);
    expect(cut.inputIds.shape[1]).toBe(12);
    const chosenFull = Array.from(pairs.inputIds.dataSync()).slice(0, pairs.inputIds.shape[1]);
    const chosenLen = Array.from(pairs.attentionMask.dataSync())
      .slice(0, pairs.inputIds.shape[1])
      .filter((m) => m === 1).length;
    const chosenCut = Array.from(cut.inputIds.dataSync()).slice(0, 12);
    expect(chosenCut).toEqual(chosenFull.slice(chosenLen - 12, chosenLen));
    expect(Array.from(cut.completionMask.dataSync()).some((m) => m === 1)).toBe(true);
    expect(() => conversationBatch(codec, [conversations[0]], 2.5)).toThrow(/maxLength must be a positive integer/);
  });

  it("stages carry headChunkRows / checkpointLayers and the configs baseDtype, settable with --set", () => {
    for (const make of [arpSeedConfig, arpTinyConfig, opdSeedConfig, opdTinyConfig, oelSeedConfig, oelTinyConfig]) {
      const c = make();
      expect(c.baseDtype).toBe("f32");
    }
    const opd = opdTinyConfig();
    expect(stageForward(opd.train)).toEqual({ maxLength: 1024, headChunkRows: undefined, checkpointLayers: false });
    setConfigValue(opd, "train.headChunkRows", "256");
    setConfigValue(opd, "train.checkpointLayers", "true");
    setConfigValue(opd, "baseDtype", "bf16");
    expect(stageForward(opd.train)).toEqual({ maxLength: 1024, headChunkRows: 256, checkpointLayers: true });
    expect(checkBaseDtype(opd.baseDtype)).toBe("bf16");
    setConfigValue(opd, "train.headChunkRows", "0");
    expect(() => stageForward(opd.train)).toThrow(/headChunkRows must be a positive integer/);
    expect(() => checkBaseDtype("f16")).toThrow(/baseDtype must be "f32" or "bf16", got "f16"/);
    // The ARP SFT stage's seed-card name turns recomputation on as well.
    expect(stageForward(arpSeedConfig().sft).checkpointLayers).toBe(true);
    const chat = tinyChat({ seed: 1 });
    expect(() =>
      sftObjective(chat.model, { tokenizer: chat.tokenizer, template: chat.chatTemplate }, { headChunkRows: 2.5 }).loss(
        conversations,
        10,
      ),
    ).toThrow(/headChunkRows must be a positive integer, got 2.5/);
  });
});

describe("training memory", () => {
  it("a trainer step (OPD and self-distillation objectives) on a 16k vocabulary never allocates a [T, V] float array", async () => {
    const V = 16384;
    const model = createModel(
      {
        architectures: ["Qwen3ForCausalLM"],
        vocab_size: V,
        hidden_size: 16,
        intermediate_size: 32,
        num_hidden_layers: 1,
        num_attention_heads: 2,
        num_key_value_heads: 1,
        head_dim: 8,
        tie_word_embeddings: true,
      },
      { seed: 2 },
    );
    const adapter = randomAdapter(model, 4);
    const P = 200;
    const C = 312;
    const T = P + C;
    const opd: OpdSample = {
      episodeId: "e",
      turn: 0,
      promptIds: randomIds(P, V, 7),
      completionIds: randomIds(C, V, 8),
      samplerLogps: Array.from({ length: C }, (_, i) => -9 - (i % 5) * 0.1),
      teacherLogps: Array.from({ length: C }, (_, i) => -9.5 + (i % 3) * 0.2),
    };
    const distill: ConsolidationSample = {
      episodeId: "e",
      turn: 0,
      studentPromptIds: randomIds(P, V, 9),
      teacherPromptIds: randomIds(P + 20, V, 10),
      completionIds: randomIds(C, V, 11),
    };
    const steps: [string, Objective<unknown>, unknown][] = [
      ["opd", opdObjective(model, { headChunkRows: 32, checkpointLayers: true }) as Objective<unknown>, opd],
      ["distill", consolidationObjective(model, adapter, { headChunkRows: 32 }) as Objective<unknown>, distill],
    ];
    for (const [stage, objective, example] of steps) {
      // Record the length of every Float32Array created during the step (host and js-backend storage).
      const Original = globalThis.Float32Array;
      let largest = 0;
      class Tracked extends Original {
        // biome-ignore lint/suspicious/noExplicitAny: mirrors the typed-array constructor overloads
        constructor(...args: any[]) {
          super(...(args as []));
          if (this.length > largest) largest = this.length;
        }
        static override [Symbol.hasInstance](x: unknown): boolean {
          return x instanceof Original;
        }
      }
      globalThis.Float32Array = Tracked as unknown as Float32ArrayConstructor;
      let losses: number[];
      try {
        const r = await train({
          stage,
          adapter,
          data: [example],
          objective,
          config: { lr: 1e-3, maxSteps: 1, shuffle: false },
          progress: null,
        });
        losses = r.history.map((h) => h.loss);
      } finally {
        globalThis.Float32Array = Original;
      }
      expect(losses.length).toBe(1);
      expect(Number.isFinite(losses[0])).toBe(true);
      // 32 rows of logits (0.5 Mi values) bound the step; [T, V] would be 8 Mi.
      expect(largest).toBeGreaterThanOrEqual(32 * V);
      expect(largest).toBeLessThan((T * V) / 8);
    }
    // The same objective on full logits does allocate them: the tracker can see a [T, V] array.
    const Original = globalThis.Float32Array;
    let largest = 0;
    class Tracked extends Original {
      // biome-ignore lint/suspicious/noExplicitAny: mirrors the typed-array constructor overloads
      constructor(...args: any[]) {
        super(...(args as []));
        if (this.length > largest) largest = this.length;
      }
    }
    globalThis.Float32Array = Tracked as unknown as Float32ArrayConstructor;
    try {
      noGrad(() => model.forward(new Tensor(Int32Array.from(randomIds(T, V, 12)), [1, T], "i32")));
    } finally {
      globalThis.Float32Array = Original;
    }
    expect(largest).toBeGreaterThanOrEqual(T * V);
  });
});
