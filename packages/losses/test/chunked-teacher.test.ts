// A teacher given as ChunkedLogits (hidden states + head): the same divergences, metrics and
// student gradients as the teacher's full logits, and the memory it saves — the teacher's chunks
// are projected per chunk and again in the backward, never held until the backward.
import * as T from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { type ChunkedLogits, distillationLoss, tokenDivergence } from "../src/index.js";

const D = 8;

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

describe("distillationLoss / tokenDivergence with a chunked teacher", () => {
  const V = 50;
  const rows = 12;
  const teacherRowsCount = rows + 5;
  const teacherHidden = randn(11, [teacherRowsCount, D]);
  const teacherWeight = randn(12, [V, D], 0.8);
  const teacherRows = Array.from({ length: rows }, (_, i) => (i * 7 + 3) % teacherRowsCount);
  const mask = Array.from({ length: rows }, (_, i) => (i % 5 === 2 ? 0 : 1));

  for (const kind of ["forward_kl", "reverse_kl", "jsd"] as const) {
    for (const topK of [undefined, 6]) {
      it(`${kind}${topK ? ` top-${topK}` : ""}: equals the full teacher logits (student chunked and not), no teacher gradient`, () => {
        const run = (studentChunked: boolean, teacherChunked: boolean) => {
          const hidden = randn(1, [rows, D]).requireGrad();
          const weight = randn(2, [V, D], 0.7).requireGrad();
          const tWeight = T.tensor(teacherWeight.toFloat32Array(), teacherWeight.shape).requireGrad();
          const student: T.Tensor | ChunkedLogits = studentChunked
            ? { hidden, vocab: V, project: (r) => T.linear(r, weight), chunkRows: 5 }
            : T.linear(hidden, weight);
          const teacher: T.Tensor | ChunkedLogits = teacherChunked
            ? { hidden: teacherHidden, vocab: V, project: (r) => T.linear(r, tWeight) }
            : T.noGrad(() => T.linear(teacherHidden, tWeight));
          const options = { kind, beta: 0.3, temperature: 1.4, teacherRows, mask, topK };
          const out = distillationLoss(student, teacher, options);
          T.backward(out.loss);
          const perToken = T.noGrad(() => tokenDivergence(student, teacher, options)).toFloat32Array();
          expect(tWeight.grad).toBeNull();
          return {
            loss: out.loss.item(),
            metrics: out.metrics,
            perToken,
            dh: (hidden.grad as T.Tensor).toFloat32Array(),
            dw: (weight.grad as T.Tensor).toFloat32Array(),
          };
        };
        const want = run(false, false);
        for (const studentChunked of [false, true]) {
          const got = run(studentChunked, true);
          expect(Math.abs(got.loss - want.loss)).toBeLessThan(1e-5 * (1 + Math.abs(want.loss)));
          expect(Math.abs(got.metrics.divergence - want.metrics.divergence)).toBeLessThan(1e-5);
          expect(got.metrics.num_tokens).toBe(want.metrics.num_tokens);
          expect(maxDiff(got.perToken, want.perToken)).toBeLessThan(1e-5);
          expect(maxDiff(got.dh, want.dh)).toBeLessThan(1e-5);
          expect(maxDiff(got.dw, want.dw)).toBeLessThan(1e-5);
        }
      });
    }
  }

  it("a chunk with no masked row and a fully masked batch give 0 with a zero gradient", () => {
    const hidden = randn(3, [6, D]).requireGrad();
    const weight = randn(4, [V, D]);
    const teacher: ChunkedLogits = { hidden: teacherHidden, vocab: V, project: (r) => T.linear(r, teacherWeight) };
    const out = distillationLoss({ hidden, vocab: V, project: (r) => T.linear(r, weight), chunkRows: 3 }, teacher, {
      kind: "forward_kl",
      teacherRows: [0, 1, 2, 3, 4, 5],
      mask: [0, 0, 0, 1, 0, 1],
    });
    T.backward(out.loss);
    const dh = (hidden.grad as T.Tensor).toFloat32Array();
    expect(maxDiff(dh.subarray(0, 3 * D), new Float32Array(3 * D))).toBe(0);
    expect(Math.max(...dh.subarray(3 * D).map(Math.abs))).toBeGreaterThan(0);
    const none = T.noGrad(() =>
      tokenDivergence(T.linear(hidden, weight), teacher, { teacherRows: [0, 1, 2, 3, 4, 5], mask: [0, 0, 0, 0, 0, 0] }),
    );
    expect(Array.from(none.toFloat32Array())).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it("rejects a teacher row outside the teacher, and a vocabulary mismatch, by name", () => {
    const student: ChunkedLogits = { hidden: randn(5, [3, D]), vocab: V, project: (r) => T.linear(r, teacherWeight) };
    const teacher: ChunkedLogits = { hidden: teacherHidden, vocab: V, project: (r) => T.linear(r, teacherWeight) };
    expect(() => tokenDivergence(student, teacher, { teacherRows: [0, 1, teacherRowsCount] })).toThrow(
      /teacherRows\[2\] = 17 is outside \[0, 17\)/,
    );
    expect(() => tokenDivergence(student, { ...teacher, vocab: V + 1 })).toThrow(
      /teacher vocabulary 51 differs from the student's 50/,
    );
    expect(() => tokenDivergence(student, teacher)).toThrow(
      /teacher has 17 rows, student \[3, 50\] 3; pass teacherRows/,
    );
  });
});

describe("memory of a chunked teacher", () => {
  // memory("js").peakBytes cannot show this on its own: the js backend counts every undisposed
  // array until the garbage collector runs, which it cannot do inside a synchronous step, so both
  // paths' peaks are dominated by the softmax kernels' garbage. What matters is which teacher
  // logits are still referenced (undisposed): each teacher projection is tracked directly.
  it("teacher chunks are freed per chunk (forward and backward) instead of living until the backward", () => {
    const V = 2048;
    const N = 64;
    const R = 8;
    const hiddenInit = randn(21, [N, D]);
    const weight = randn(22, [V, D], 0.5);
    const teacherHidden = randn(23, [N + 10, D]);
    const teacherWeight = randn(24, [V, D], 0.5);
    const teacherRows = Array.from({ length: N }, (_, i) => (i * 13 + 4) % (N + 10));
    const measure = (path: "chunked teacher" | "teacher chunks as tensors") => {
      const made: T.Tensor[] = [];
      let mostAlive = 0;
      const teacherProject = (rows: T.Tensor) => {
        const out = T.linear(rows, teacherWeight);
        made.push(out);
        mostAlive = Math.max(mostAlive, made.filter((t) => !t.isDisposed).length);
        return out;
      };
      const hidden = T.tensor(hiddenInit.toFloat32Array(), hiddenInit.shape).requireGrad();
      let loss: T.Tensor;
      if (path === "chunked teacher") {
        loss = distillationLoss(
          { hidden, vocab: V, project: (r) => T.linear(r, weight), chunkRows: R },
          { hidden: teacherHidden, vocab: V, project: teacherProject },
          { kind: "forward_kl", teacherRows },
        ).loss;
      } else {
        // What consolidation did before: each chunk's teacher logits made as a tensor and handed
        // to the loss, whose backward closure keeps it until the backward.
        let sum: T.Tensor | null = null;
        for (let c = 0; c < N; c += R) {
          const ids = T.tensor(Int32Array.from(teacherRows.slice(c, c + R)), [R], "i32");
          const teacherChunk = T.noGrad(() => teacherProject(T.embedding(teacherHidden, ids)));
          const part = distillationLoss(
            { hidden: T.narrow(hidden, 0, c, c + R), vocab: V, project: (r) => T.linear(r, weight), chunkRows: R },
            teacherChunk,
            { kind: "forward_kl" },
          );
          const weighted = T.mul(part.loss, R / N);
          sum = sum ? T.add(sum, weighted) : weighted;
        }
        loss = sum as T.Tensor;
      }
      const aliveBeforeBackward = made.filter((t) => !t.isDisposed).length;
      T.backward(loss);
      return {
        loss: loss.item(),
        dh: (hidden.grad as T.Tensor).toFloat32Array(),
        aliveBeforeBackward,
        mostAliveBytes: mostAlive * R * V * 4,
        projections: made.length,
      };
    };
    const after = measure("chunked teacher");
    const before = measure("teacher chunks as tensors");
    expect(Math.abs(after.loss - before.loss)).toBeLessThan(1e-5 * (1 + Math.abs(before.loss)));
    expect(maxDiff(after.dh, before.dh)).toBeLessThan(1e-5);
    // Before: all N/R chunks of teacher logits (N·V floats) were alive when the backward started.
    expect(before.aliveBeforeBackward).toBe(N / R);
    expect(before.mostAliveBytes).toBe(N * V * 4);
    // Now: none survives the forward and one at a time is alive, at the price of projecting each
    // teacher chunk twice (again in the backward).
    expect(after.aliveBeforeBackward).toBe(0);
    expect(after.mostAliveBytes).toBe(R * V * 4);
    expect(after.projections).toBe(2 * (N / R));
  });
});
