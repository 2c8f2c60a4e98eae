// Every loss given ChunkedLogits (hidden states + head, projected a few rows at a time) equals
// the same loss on the full logits: values, metrics, and gradients of the hidden states and head.
import * as T from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  type ChunkedLogits,
  type LossResult,
  distillationLoss,
  dpoLossFromLogits,
  sftLoss,
  tokenDivergence,
  tokenLogProbs,
} from "../src/index.js";

const B = 2;
const L = 6;
const D = 8;
const V = 50;

function randn(seed: number, shape: number[], scale = 1): T.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return T.tensor(
    new T.Rng(seed).normal(n).map((v) => v * scale),
    shape,
  );
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/**
 * Runs `loss(logits)` with full logits and with chunked ones (chunk of 4 rows: ragged) and
 * compares loss, metrics and the gradients of hidden and head weight.
 */
function compare(lossOf: (logits: T.Tensor | ChunkedLogits) => LossResult | T.Tensor, lead: number[] = [B, L]) {
  const hiddenInit = randn(1, [...lead, D]);
  const weightInit = randn(2, [V, D], 0.7);
  const run = (chunked: boolean) => {
    const hidden = T.tensor(hiddenInit.toFloat32Array(), hiddenInit.shape).requireGrad();
    const weight = T.tensor(weightInit.toFloat32Array(), weightInit.shape).requireGrad();
    const logits: T.Tensor | ChunkedLogits = chunked
      ? { hidden, vocab: V, project: (rows) => T.linear(rows, weight), chunkRows: 4 }
      : T.linear(hidden, weight);
    const out = lossOf(logits);
    const loss = "loss" in out ? out.loss : T.sum(T.mul(out, randn(9, [...out.shape])));
    T.backward(loss);
    return {
      loss: loss.item(),
      metrics: "metrics" in out ? out.metrics : {},
      dh: (hidden.grad as T.Tensor).toFloat32Array(),
      dw: (weight.grad as T.Tensor).toFloat32Array(),
    };
  };
  const full = run(false);
  const chunked = run(true);
  expect(Math.abs(chunked.loss - full.loss)).toBeLessThan(1e-5 * (1 + Math.abs(full.loss)));
  for (const [k, v] of Object.entries(full.metrics)) {
    if (Number.isNaN(v)) expect(chunked.metrics[k]).toBeNaN();
    else expect(Math.abs(chunked.metrics[k] - v), k).toBeLessThan(1e-5 * (1 + Math.abs(v)));
  }
  expect(maxDiff(chunked.dh, full.dh)).toBeLessThan(1e-5);
  expect(maxDiff(chunked.dw, full.dw)).toBeLessThan(1e-5);
}

const ids = T.tensor(
  Int32Array.from({ length: B * L }, (_, i) => (i * 17 + 3) % V),
  [B, L],
  "i32",
);
const labels = T.tensor(
  Int32Array.from(ids.dataSync() as Int32Array, (v, i) => (i % L < 2 ? -100 : v)),
  [B, L],
  "i32",
);

describe("ChunkedLogits", () => {
  for (const chunkRows of [4, 64])
    it(`training steps on chunked logits (${chunkRows === 4 ? "three chunks" : "one chunk"}) leave no memory behind`, () => {
      const x = randn(5, [B, L, D]);
      const w0 = randn(6, [D, D], 0.5).requireGrad();
      const weight = randn(7, [V, D], 0.7).requireGrad();
      const live: number[] = [];
      for (let step = 0; step < 4; step++) {
        T.tidy(() => {
          for (const p of [w0, weight]) {
            p.grad?.dispose();
            p.grad = null;
          }
          // hidden needs a gradient (it comes from w0): each chunk's detached copy gets one during backward.
          const hidden = T.linear(x, w0);
          T.backward(sftLoss({ hidden, vocab: V, project: (rows) => T.linear(rows, weight), chunkRows }, labels).loss);
        });
        live.push(T.memory().allocations);
      }
      expect(live.slice(1), `live allocations after each step: ${live.join(", ")}`).toEqual([
        live[0],
        live[0],
        live[0],
      ]);
    });

  it("tokenLogProbs (with and without a gradient hint)", () => {
    const targets = T.tensor(
      Int32Array.from({ length: B * L }, (_, i) => (i % 5 === 0 ? -100 : (i * 7) % V)),
      [B, L],
      "i32",
    );
    compare((logits) => tokenLogProbs(logits, targets));
    compare((logits) => T.mul(tokenLogProbs(logits, targets, { expectedGradient: -0.25 }), 1));
  });

  it("sftLoss with accuracy and entropy metrics", () => {
    compare((logits) => sftLoss(logits, labels, { entropy: true }));
    compare((logits) => sftLoss(logits, labels, { numItemsInBatch: 40 }));
  });

  it("dpoLossFromLogits (policy and reference both chunked)", () => {
    const mask = T.tensor(
      Float32Array.from({ length: B * L }, (_, i) => (i % L >= 3 ? 1 : 0)),
      [B, L],
    );
    const refHidden = randn(5, [B, L, D]);
    const refWeight = randn(6, [V, D], 0.7);
    compare((logits) =>
      dpoLossFromLogits({
        policyLogits: logits,
        inputIds: ids,
        completionMask: mask,
        reference: {
          logits: () => ({ hidden: refHidden, vocab: V, project: (r) => T.linear(r, refWeight), chunkRows: 5 }),
        },
      }),
    );
  });

  for (const kind of ["forward_kl", "reverse_kl", "jsd"] as const) {
    it(`distillationLoss and tokenDivergence (${kind}), masked rows and teacher row map`, () => {
      const teacher = randn(7, [B * L + 3, V], 2);
      const teacherRows = Array.from({ length: B * L }, (_, i) => (i * 5 + 2) % (B * L + 3));
      const mask = Array.from({ length: B * L }, (_, i) => (i % 4 === 1 ? 0 : 1));
      const options = { kind, beta: 0.3, teacherRows, mask };
      compare((logits) => distillationLoss(logits, teacher, options));
      compare((logits) => tokenDivergence(logits, teacher, { ...options, topK: 5 }));
    });
  }
});
