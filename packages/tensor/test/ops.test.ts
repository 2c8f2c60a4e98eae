import { describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { checkOp, idx, randomTensor } from "./helpers.js";

describe("the gradient checker itself", () => {
  it("catches a wrong backward", () => {
    const x = randomTensor([5]);
    const wrong = (t: T.Tensor) =>
      T.record(
        new T.Tensor(
          Float32Array.from(t.toFloat32Array(), (v) => v * v),
          t.shape,
        ),
        "bad",
        [t],
        (g) => [g],
      );
    expect(() => checkOp({ inputs: [x], op: wrong, ref: (a) => a.map((v) => v * v) })).toThrow(/mismatch/);
  });
});

describe("reductions", () => {
  const shape = [2, 3, 4];
  const reduceRef = (x: Float64Array, axes: number[], f: (vals: number[]) => number) => {
    const outShape = shape.map((d, i) => (axes.includes(i) ? 1 : d));
    const groups = new Map<number, number[]>();
    for (let a = 0; a < 2; a++)
      for (let b = 0; b < 3; b++)
        for (let c = 0; c < 4; c++) {
          const co = [a, b, c].map((v, i) => (axes.includes(i) ? 0 : v));
          const key = idx(outShape, ...co);
          if (!groups.has(key)) groups.set(key, []);
          groups.get(key)!.push(x[idx(shape, a, b, c)]);
        }
    return Float64Array.from([...groups.keys()].sort((p, q) => p - q).map((k) => f(groups.get(k)!)));
  };
  const lse = (v: number[]) => {
    const m = Math.max(...v);
    return m + Math.log(v.reduce((s, x) => s + Math.exp(x - m), 0));
  };
  for (const axes of [[0], [1], [2], [0, 2], [0, 1, 2]]) {
    it(`sum / mean / max / logsumexp over ${JSON.stringify(axes)}`, () => {
      checkOp({
        inputs: [randomTensor(shape)],
        op: (x) => T.sum(x, axes),
        ref: (x) => reduceRef(x, axes, (v) => v.reduce((a, b) => a + b, 0)),
      });
      checkOp({
        inputs: [randomTensor(shape)],
        op: (x) => T.mean(x, axes, true),
        ref: (x) => reduceRef(x, axes, (v) => v.reduce((a, b) => a + b, 0) / v.length),
      });
      checkOp({
        inputs: [randomTensor(shape)],
        op: (x) => T.max(x, axes),
        ref: (x) => reduceRef(x, axes, (v) => Math.max(...v)),
      });
      checkOp({
        inputs: [randomTensor(shape, -3, 3)],
        op: (x) => T.logsumexp(x, axes),
        ref: (x) => reduceRef(x, axes, lse),
      });
    });
  }

  it("argmax returns first index of the max as i32", () => {
    const t = T.tensor([
      [1, 5, 5],
      [7, 2, 0],
    ]);
    const a = T.argmax(t, 1);
    expect(a.dtype).toBe("i32");
    expect(Array.from(a.dataSync())).toEqual([1, 0]);
    expect(Array.from(T.argmax(t, 0).dataSync())).toEqual([1, 0, 0]);
  });
});

describe("movement", () => {
  it("permute / transpose / reshape", () => {
    checkOp({
      inputs: [randomTensor([2, 3, 4])],
      op: (x) => T.permute(x, [2, 0, 1]),
      ref: (x) => {
        const out = new Float64Array(24);
        for (let a = 0; a < 2; a++)
          for (let b = 0; b < 3; b++)
            for (let c = 0; c < 4; c++) out[idx([4, 2, 3], c, a, b)] = x[idx([2, 3, 4], a, b, c)];
        return out;
      },
    });
    const x = randomTensor([2, 6]);
    const v = T.reshape(x, [3, -1]);
    expect(v.shape).toEqual([3, 4]);
    expect(v.dataSync().buffer).toBe(x.dataSync().buffer);
    expect(() => T.reshape(x, [5, -1])).toThrow(T.ShapeError);
  });

  it("slice (view and copy), concat, stack, split", () => {
    checkOp({
      inputs: [randomTensor([3, 5])],
      op: (x) => T.narrow(x, 1, 1, -1),
      ref: (x) => Float64Array.from({ length: 9 }, (_, i) => x[Math.floor(i / 3) * 5 + 1 + (i % 3)]),
    });
    checkOp({ inputs: [randomTensor([4, 2])], op: (x) => T.narrow(x, 0, 1, 3), ref: (x) => x.slice(2, 6) });
    checkOp({
      inputs: [randomTensor([2, 2]), randomTensor([2, 3])],
      op: (a, b) => T.concat([a, b], 1),
      ref: (a, b) => Float64Array.from([a[0], a[1], b[0], b[1], b[2], a[2], a[3], b[3], b[4], b[5]]),
    });
    checkOp({
      inputs: [randomTensor([3]), randomTensor([3])],
      op: (a, b) => T.stack([a, b], 1),
      ref: (a, b) => Float64Array.from([a[0], b[0], a[1], b[1], a[2], b[2]]),
    });
    const parts = T.split(T.arange(0, 10), [3, 7]);
    expect(parts[1].toArray()).toEqual([3, 4, 5, 6, 7, 8, 9]);
    expect(() => T.concat([randomTensor([2, 2]), randomTensor([3, 3])], 0)).toThrow(/concat/);
  });
});

function matmulRef(
  a: Float64Array,
  b: Float64Array,
  batch: number,
  m: number,
  n: number,
  k: number,
  tA: boolean,
  tB: boolean,
  bA: boolean,
  bB: boolean,
) {
  const out = new Float64Array(batch * m * n);
  for (let z = 0; z < batch; z++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) {
          const av = a[(bA ? 0 : z * m * k) + (tA ? p * m + i : i * k + p)];
          const bv = b[(bB ? 0 : z * k * n) + (tB ? j * k + p : p * n + j)];
          s += av * bv;
        }
        out[(z * m + i) * n + j] = s;
      }
  return out;
}

describe("matmul", () => {
  for (const transA of [false, true])
    for (const transB of [false, true])
      for (const [bA, bB] of [
        [false, false],
        [true, false],
        [false, true],
      ]) {
        it(`batched transA=${transA} transB=${transB} broadcastA=${bA} broadcastB=${bB}`, () => {
          const [batch, m, n, k] = [3, 4, 5, 6];
          const aShape = bA ? [1, ...(transA ? [k, m] : [m, k])] : [batch, ...(transA ? [k, m] : [m, k])];
          const bShape = bB ? [1, ...(transB ? [n, k] : [k, n])] : [batch, ...(transB ? [n, k] : [k, n])];
          checkOp({
            inputs: [randomTensor(aShape), randomTensor(bShape)],
            op: (a, b) => T.matmul(a, b, { transA, transB }),
            ref: (a, b) => matmulRef(a, b, batch, m, n, k, transA, transB, bA, bB),
          });
        });
      }

  it("linear folds leading dims and accepts a frozen bf16 weight", () => {
    const x = randomTensor([2, 3, 4]);
    const w = randomTensor([5, 4], -1, 1, false);
    const bias = randomTensor([5]);
    checkOp({
      inputs: [x, bias],
      op: (xx, bb) => T.linear(xx, w, bb),
      ref: (xx, bb) => {
        const wd = w.toFloat32Array();
        const out = new Float64Array(30);
        for (let r = 0; r < 6; r++)
          for (let o = 0; o < 5; o++) {
            let s = bb[o];
            for (let i = 0; i < 4; i++) s += xx[r * 4 + i] * wd[o * 4 + i];
            out[r * 5 + o] = s;
          }
        return out;
      },
    });
    const wBf16 = w.to("bf16");
    const y16 = T.linear(x.detach(), wBf16);
    const yRef = T.linear(x.detach(), wBf16.to("f32"));
    expect(Array.from(y16.dataSync())).toEqual(Array.from(yRef.dataSync()));
  });

  it("names the op and shapes on a mismatch", () => {
    expect(() => T.matmul(randomTensor([2, 3]), randomTensor([4, 5]))).toThrow(
      /matmul: inner dims differ: a \[1, 2, 3\]/,
    );
  });
});
