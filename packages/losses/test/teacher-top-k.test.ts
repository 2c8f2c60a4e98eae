// teacherTopKDivergence against an independent float64 reference (bucket distributions built from
// the full log-softmax, textbook KL) and finite differences; chunked = dense; errors on bad input.
import * as T from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { LossInputError, LossOptionError, teacherTopKDivergence, tokenDivergence } from "../src/index.js";
import { expectClose, kl, logSoftmax, numericGrad, randomArray, rowsOf, rng } from "./reference.js";

const V = 11;
const N = 5;
const K = 3;

/** A teacher's top-k (ids descending by probability) from full teacher logits; `drop` pads the last slots of row 1 with −1. */
function topKOf(zt: Float32Array, k: number, drop = 0) {
  const ids: number[] = [];
  const logprobs: number[] = [];
  rowsOf(zt, V).forEach((row, r) => {
    const p = logSoftmax(row);
    const order = p.map((v, i) => [v, i] as const).sort((a, b) => b[0] - a[0]);
    for (let j = 0; j < k; j++) {
      const pad = r === 1 && j >= k - drop;
      ids.push(pad ? -1 : order[j][1]);
      logprobs.push(pad ? 0 : order[j][0]);
    }
  });
  return { k, ids, logprobs };
}

/** Float64 reference: buckets = listed ids + the tail, the tail's teacher mass floored at 1e-7. */
function reference(
  zs: number[],
  teacher: { k: number; ids: number[]; logprobs: number[] },
  kind: string,
  mask: number[],
) {
  return rowsOf(zs, V).map((row, r) => {
    if (!mask[r]) return 0;
    const s = logSoftmax(row);
    const listed: number[] = [];
    const sb: number[] = [];
    const pb: number[] = [];
    for (let j = 0; j < teacher.k; j++) {
      const id = teacher.ids[r * teacher.k + j];
      if (id < 0) continue;
      listed.push(id);
      sb.push(s[id]);
      pb.push(teacher.logprobs[r * teacher.k + j]);
    }
    const tailS = s.filter((_, v) => !listed.includes(v)).reduce((a, v) => a + Math.exp(v), 0);
    const tailP = Math.max(1 - pb.reduce((a, v) => a + Math.exp(v), 0), 1e-7);
    sb.push(Math.log(tailS));
    pb.push(Math.log(tailP));
    return kind === "reverse_kl" ? kl(sb, pb) : kl(pb, sb);
  });
}

describe("teacherTopKDivergence", () => {
  const mask = [1, 1, 0, 1, 1];
  for (const kind of ["reverse_kl", "forward_kl"] as const) {
    for (const drop of [0, 1]) {
      it(`${kind}${drop ? " (a row with fewer than k ids)" : ""}: values and gradient vs float64 finite differences`, () => {
        const zs = randomArray(N * V, 31 + drop, 2);
        const teacher = topKOf(randomArray(N * V, 47 + drop, 2), K, drop);
        const x = T.tensor(zs, [N, V]).requireGrad();
        const weights = Array.from({ length: N }, (_, i) => 0.5 + i);
        const out = teacherTopKDivergence(x, teacher, { kind, mask });
        const ref = reference(Array.from(zs), teacher, kind, mask);
        expectClose(out.dataSync() as Float32Array, ref, 1e-6, 1e-5);
        T.backward(T.sum(T.mul(out, T.tensor(Float32Array.from(weights), [N]))));
        const f = (z: number[]) => reference(z, teacher, kind, mask).reduce((a, v, i) => a + v * weights[i], 0);
        expectClose(x.grad?.dataSync() as Float32Array, numericGrad(f, Array.from(zs)), 2e-6, 1e-3);
      });
    }
  }

  it("with every token listed it is the full-vocabulary KL (tokenDivergence)", () => {
    const zs = randomArray(N * V, 5, 2);
    const zt = randomArray(N * V, 6, 2);
    const teacher = topKOf(zt, V);
    for (const kind of ["reverse_kl", "forward_kl"] as const) {
      const a = teacherTopKDivergence(T.tensor(zs, [N, V]), teacher, { kind }).dataSync() as Float32Array;
      const b = tokenDivergence(T.tensor(zs, [N, V]), T.tensor(zt, [N, V]), { kind }).dataSync() as Float32Array;
      expectClose(a, b, 1e-5, 1e-4);
    }
  });

  it("on ChunkedLogits equals the dense logits: values and gradients of hidden and head", () => {
    const D = 6;
    const lead = [2, 4];
    const rows = 8;
    const h0 = randomArray(rows * D, 71);
    const w0 = randomArray(V * D, 72, 0.8);
    const teacher = topKOf(randomArray(rows * V, 73, 2), K);
    const g = T.tensor(randomArray(rows, 74), lead);
    const run = (chunked: boolean) => {
      const hidden = T.tensor(h0, [...lead, D]).requireGrad();
      const weight = T.tensor(w0, [V, D]).requireGrad();
      const logits = chunked
        ? { hidden, vocab: V, project: (r: T.Tensor) => T.linear(r, weight), chunkRows: 3 }
        : T.linear(hidden, weight);
      const out = teacherTopKDivergence(logits, teacher);
      expect(out.shape).toEqual(lead);
      T.backward(T.sum(T.mul(out, g)));
      return [out.dataSync(), hidden.grad!.dataSync(), weight.grad!.dataSync()] as Float32Array[];
    };
    const dense = run(false);
    const chunked = run(true);
    for (let i = 0; i < 3; i++) expectClose(chunked[i], dense[i], 1e-5, 1e-4);
  });

  it("the teacher's listed tokens gain probability under a few gradient steps of the reverse KL", () => {
    // The sampled-token estimate moves one token per position; this form moves every listed one.
    const r = rng(3);
    const z = Float32Array.from({ length: V }, () => r() - 0.5);
    const teacher = { k: 2, ids: [4, 9], logprobs: [Math.log(0.6), Math.log(0.35)] };
    let x = T.tensor(z, [1, V]).requireGrad();
    const first = teacherTopKDivergence(x, teacher).item();
    for (let step = 0; step < 200; step++) {
      const out = teacherTopKDivergence(x, teacher);
      T.backward(T.sum(out));
      const next = (x.dataSync() as Float32Array).map((v, i) => v - 0.5 * (x.grad!.dataSync() as Float32Array)[i]);
      x = T.tensor(next, [1, V]).requireGrad();
    }
    const last = teacherTopKDivergence(x, teacher).item();
    const p = logSoftmax(x.dataSync() as Float32Array).map(Math.exp);
    expect(last).toBeLessThan(first / 10);
    expect(p[4]).toBeGreaterThan(0.55);
    expect(p[9]).toBeGreaterThan(0.3);
  });

  it("names bad input", () => {
    const x = T.tensor(randomArray(2 * V, 1), [2, V]);
    expect(() => teacherTopKDivergence(x, { k: 2, ids: [1, 2, 3], logprobs: [-1, -1, -1] })).toThrow(LossInputError);
    expect(() => teacherTopKDivergence(x, { k: 1, ids: [1, V], logprobs: [-1, -1] })).toThrow(/outside \[0, 11\)/);
    expect(() => teacherTopKDivergence(x, { k: 2, ids: [1, 1, 2, 3], logprobs: [-1, -1, -1, -1] })).toThrow(
      /listed twice/,
    );
    expect(() => teacherTopKDivergence(x, { k: 1, ids: [1, 2], logprobs: [0.5, -1] })).toThrow(/≤ 0/);
    expect(() => teacherTopKDivergence(x, { k: 2, ids: [1, 2, 3, 4], logprobs: [-0.1, -0.2, -1, -1] })).toThrow(
      /add up to/,
    );
    expect(() => teacherTopKDivergence(x, { k: 1, ids: [1, 2], logprobs: [-1, -1] }, { kind: "jsd" as never })).toThrow(
      LossOptionError,
    );
  });
});
