// RMSNorm and softmax cross-entropy row kernels against float64 references.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IndexError, ShapeError } from "../../src/errors.js";
import { type WasmKernels, createWasmKernels } from "../../src/wasm/index.js";
import { randomF32, rng } from "./reference.js";

const SEED = Date.now() % 1_000_000;
const next = rng(SEED);

function maxRelDiff(got: ArrayLike<number>, want: ArrayLike<number>, floor = 1e-6): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++)
    worst = Math.max(worst, Math.abs(got[i] - want[i]) / Math.max(Math.abs(want[i]), floor));
  return worst;
}

function rmsRef(x: Float32Array, w: Float32Array, dim: number, eps: number, zc: boolean) {
  const rows = x.length / dim;
  const out = new Float64Array(x.length);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let j = 0; j < dim; j++) s += x[r * dim + j] ** 2;
    rstd[r] = 1 / Math.sqrt(s / dim + eps);
    for (let j = 0; j < dim; j++) out[r * dim + j] = x[r * dim + j] * rstd[r] * (zc ? 1 + w[j] : w[j]);
  }
  return { out, rstd };
}

function softmaxRef(logits: Float32Array, rows: number, vocab: number) {
  const probs = new Float64Array(rows * vocab);
  const lse = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let mx = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < vocab; j++) mx = Math.max(mx, logits[r * vocab + j]);
    let s = 0;
    for (let j = 0; j < vocab; j++) s += Math.exp(logits[r * vocab + j] - mx);
    lse[r] = mx + Math.log(s);
    for (let j = 0; j < vocab; j++) probs[r * vocab + j] = Math.exp(logits[r * vocab + j] - lse[r]);
  }
  return { probs, lse };
}

function klRef(
  student: Float32Array,
  teacher: Float32Array,
  map: Int32Array | null,
  rows: number,
  vocab: number,
  c: number,
  reverse: boolean,
) {
  const lse = (x: Float32Array, o: number) => {
    let mx = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < vocab; j++) mx = Math.max(mx, x[o + j] * c);
    let s = 0;
    for (let j = 0; j < vocab; j++) s += Math.exp(x[o + j] * c - mx);
    return mx + Math.log(s);
  };
  const loss = new Float64Array(rows);
  const lseS = new Float64Array(rows);
  const lseT = new Float64Array(rows);
  const grad = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    const os = r * vocab;
    const ot = (map ? map[r] : r) * vocab;
    lseS[r] = lse(student, os);
    lseT[r] = lse(teacher, ot);
    const logS = (j: number) => student[os + j] * c - lseS[r];
    const logP = (j: number) => teacher[ot + j] * c - lseT[r];
    let kl = 0;
    for (let j = 0; j < vocab; j++) {
      const w = Math.exp(reverse ? logS(j) : logP(j));
      if (w > 0) kl += w * (reverse ? logS(j) - logP(j) : logP(j) - logS(j));
    }
    loss[r] = kl;
    for (let j = 0; j < vocab; j++)
      grad[os + j] = reverse ? Math.exp(logS(j)) * (logS(j) - logP(j) - kl) : Math.exp(logS(j)) - Math.exp(logP(j));
  }
  return { loss, lseS, lseT, grad };
}

function ceRef(
  logits: Float32Array,
  targets: Int32Array,
  rows: number,
  vocab: number,
  ignore: number,
  g: Float32Array,
) {
  const loss = new Float64Array(rows);
  const lse = new Float64Array(rows);
  const d = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    let mx = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < vocab; j++) mx = Math.max(mx, logits[r * vocab + j]);
    let s = 0;
    for (let j = 0; j < vocab; j++) s += Math.exp(logits[r * vocab + j] - mx);
    lse[r] = mx + Math.log(s);
    const t = targets[r];
    if (t === ignore) continue;
    loss[r] = lse[r] - logits[r * vocab + t];
    for (let j = 0; j < vocab; j++)
      d[r * vocab + j] = (Math.exp(logits[r * vocab + j] - lse[r]) - (j === t ? 1 : 0)) * g[r];
  }
  return { loss, lse, d };
}

describe.each([1, 2])("wasm row kernels, threads=%i", (threads) => {
  let kernels: WasmKernels;
  beforeAll(async () => {
    kernels = await createWasmKernels({ threads });
  });
  afterAll(() => kernels.dispose());

  // 2100 x 130 = 273k elements: above the threshold where RMSNorm rows are split across threads.
  for (const [rows, dim] of [
    [1, 1],
    [3, 7],
    [2100, 130],
  ])
    for (const zc of [false, true])
      it(`rmsNorm ${rows}x${dim} zeroCentered=${zc} (seed ${SEED})`, () => {
        const x = randomF32(rows * dim, next, 3);
        const w = randomF32(dim, next);
        const out = new Float32Array(rows * dim);
        const rstd = new Float32Array(rows);
        kernels.rmsNorm(x, w, out, rstd, dim, 1e-6, zc);
        const want = rmsRef(x, w, dim, 1e-6, zc);
        expect(maxRelDiff(rstd, want.rstd)).toBeLessThan(1e-5);
        // absolute error relative to the row scale (outputs near zero have no relative accuracy)
        let err = 0;
        for (let i = 0; i < out.length; i++) err = Math.max(err, Math.abs(out[i] - want.out[i]));
        expect(err).toBeLessThan(1e-5 * 3 * 2 * Math.max(...want.rstd));
      });

  // 2100 x 130 = 273k elements: split across threads, so dw is summed from per-thread partial rows.
  for (const [rows, dim] of [
    [1, 1],
    [3, 7],
    [2100, 130],
  ])
    for (const zc of [false, true])
      it(`rmsNormBackward ${rows}x${dim} zeroCentered=${zc}, with and without dw (seed ${SEED})`, () => {
        const x = randomF32(rows * dim, next, 3);
        const w = randomF32(dim, next);
        const g = randomF32(rows * dim, next);
        const rstd = Float32Array.from(rmsRef(x, w, dim, 1e-6, zc).rstd);
        // float64: dx = rstd·(g·w' − x̂·mean(g·w'·x̂)), dw = Σ_rows g·x̂
        const wantDx = new Float64Array(rows * dim);
        const wantDw = new Float64Array(dim);
        for (let r = 0; r < rows; r++) {
          let dot = 0;
          for (let j = 0; j < dim; j++) {
            const xh = x[r * dim + j] * rstd[r];
            dot += g[r * dim + j] * (zc ? 1 + w[j] : w[j]) * xh;
            wantDw[j] += g[r * dim + j] * xh;
          }
          for (let j = 0; j < dim; j++)
            wantDx[r * dim + j] =
              rstd[r] * (g[r * dim + j] * (zc ? 1 + w[j] : w[j]) - x[r * dim + j] * rstd[r] * (dot / dim));
        }
        const dx = new Float32Array(rows * dim).fill(Number.NaN);
        const dw = new Float32Array(dim).fill(Number.NaN);
        kernels.rmsNormBackward(x, w, rstd, g, dx, dw, dim, zc);
        const scale = Math.max(...rstd) * 4;
        let err = 0;
        for (let i = 0; i < dx.length; i++) err = Math.max(err, Math.abs(dx[i] - wantDx[i]));
        expect(err).toBeLessThan(2e-5 * scale);
        let errW = 0;
        for (let j = 0; j < dim; j++) errW = Math.max(errW, Math.abs(dw[j] - wantDw[j]));
        expect(errW).toBeLessThan(1e-5 * 3 * rows);
        const dx2 = new Float32Array(rows * dim);
        kernels.rmsNormBackward(x, w, rstd, g, dx2, null, dim, zc);
        expect(Array.from(dx2)).toEqual(Array.from(dx));
      });

  it("rmsNormBackward validates sizes", () => {
    const f = (n: number) => new Float32Array(n);
    expect(() => kernels.rmsNormBackward(f(10), f(4), f(3), f(10), f(10), null, 4, false)).toThrow(
      /not a multiple of dim=4/,
    );
    expect(() => kernels.rmsNormBackward(f(8), f(4), f(2), f(7), f(8), null, 4, false)).toThrow(/g has 7 elements/);
    expect(() => kernels.rmsNormBackward(f(8), f(4), f(2), f(8), f(8), f(3), 4, false)).toThrow(/dw has 3 elements/);
  });

  it("rmsNorm validates sizes", () => {
    expect(() =>
      kernels.rmsNorm(
        new Float32Array(10),
        new Float32Array(4),
        new Float32Array(10),
        new Float32Array(3),
        4,
        1e-6,
        false,
      ),
    ).toThrow(ShapeError);
    expect(() =>
      kernels.rmsNorm(
        new Float32Array(8),
        new Float32Array(3),
        new Float32Array(8),
        new Float32Array(2),
        4,
        1e-6,
        false,
      ),
    ).toThrow(/w has 3 elements/);
  });

  for (const [rows, vocab] of [
    [1, 1],
    [5, 7],
    [3, 33],
    [40, 2051],
  ])
    it(`cross-entropy forward + backward ${rows}x${vocab} with ignored rows (seed ${SEED})`, () => {
      const logits = randomF32(rows * vocab, next, 8);
      const targets = Int32Array.from({ length: rows }, (_, i) => (i % 4 === 3 ? -100 : Math.floor(next() * vocab)));
      const loss = new Float32Array(rows).fill(Number.NaN);
      const lse = new Float32Array(rows);
      kernels.crossEntropyForward(logits, targets, loss, lse, rows, vocab, -100);
      const g = randomF32(rows, next);
      const d = new Float32Array(rows * vocab).fill(Number.NaN);
      kernels.crossEntropyBackward(logits, targets, lse, g, d, rows, vocab, -100);
      const want = ceRef(logits, targets, rows, vocab, -100, g);
      expect(maxRelDiff(lse, want.lse)).toBeLessThan(2e-6);
      for (let r = 0; r < rows; r++) {
        if (targets[r] === -100) expect(loss[r]).toBe(0);
        expect(Math.abs(loss[r] - want.loss[r])).toBeLessThan(1e-5 * Math.max(1, Math.abs(want.lse[r])));
      }
      let err = 0;
      for (let i = 0; i < d.length; i++) err = Math.max(err, Math.abs(d[i] - want.d[i]));
      expect(err).toBeLessThan(1e-6);
    });

  for (const [rows, vocab] of [
    [1, 1],
    [3, 7],
    [4, 33],
    [30, 2051],
  ])
    it(`softmaxRows ${rows}x${vocab}, separate and in place, against float64 (seed ${SEED})`, () => {
      const logits = randomF32(rows * vocab, next, 8);
      const probs = new Float32Array(rows * vocab).fill(Number.NaN);
      const lse = new Float32Array(rows);
      kernels.softmaxRows(logits, probs, lse, rows, vocab);
      const want = softmaxRef(logits, rows, vocab);
      expect(maxRelDiff(lse, want.lse)).toBeLessThan(2e-6);
      expect(maxRelDiff(probs, want.probs, 1e-30)).toBeLessThan(2e-6);
      const inPlace = logits.slice();
      const lse2 = new Float32Array(rows);
      kernels.softmaxRows(inPlace, inPlace, lse2, rows, vocab);
      expect(inPlace).toEqual(probs);
      expect(lse2).toEqual(lse);
      const rowScale = randomF32(rows, next, 3);
      const scaled = new Float32Array(rows * vocab);
      kernels.softmaxRows(logits, scaled, lse2, rows, vocab, rowScale);
      let err = 0;
      for (let i = 0; i < scaled.length; i++)
        err = Math.max(err, Math.abs(scaled[i] - want.probs[i] * rowScale[Math.floor(i / vocab)]));
      expect(err).toBeLessThan(3e-6 * 3);
    });

  it("a NaN logit anywhere in a row makes that row's logsumexp NaN (and only that row's)", () => {
    const vocab = 37;
    for (const at of [0, 5, 35, 36]) {
      const logits = randomF32(2 * vocab, next, 4);
      logits[vocab + at] = Number.NaN;
      const lse = new Float32Array(2);
      kernels.softmaxRows(logits, new Float32Array(2 * vocab), lse, 2, vocab);
      expect(Number.isNaN(lse[1])).toBe(true);
      expect(Number.isFinite(lse[0])).toBe(true);
      const lse2 = new Float32Array(2);
      kernels.crossEntropyForward(logits, new Int32Array(2), new Float32Array(2), lse2, 2, vocab, -100);
      expect(Number.isNaN(lse2[1])).toBe(true);
      expect(lse2[0]).toBe(lse[0]);
    }
  });

  for (const [rows, vocab, reverse, scale, mapped] of [
    [1, 1, false, 1, false],
    [3, 7, true, 1, true],
    [4, 33, false, 0.6, true],
    [5, 35, true, 1.3, false],
    [20, 2051, false, 1, false],
    [20, 2051, true, 0.5, true],
  ] as const)
    it(`klDivergenceRows ${reverse ? "reverse" : "forward"} ${rows}x${vocab} scale ${scale}${mapped ? " with teacherRows" : ""} against float64 (seed ${SEED})`, () => {
      const student = randomF32(rows * vocab, next, 6);
      const teacherCount = mapped ? 3 : rows;
      const teacher = randomF32(teacherCount * vocab, next, 6);
      const map = mapped ? Int32Array.from({ length: rows }, () => Math.floor(next() * teacherCount)) : null;
      const grad = new Float32Array(rows * vocab).fill(Number.NaN);
      const loss = new Float32Array(rows);
      const lseS = new Float32Array(rows);
      const lseT = new Float32Array(rows);
      kernels.klDivergenceRows(student, teacher, map, grad, loss, lseS, lseT, { rows, vocab, scale, reverse });
      const want = klRef(student, teacher, map, rows, vocab, scale, reverse);
      expect(maxRelDiff(lseS, want.lseS)).toBeLessThan(2e-6);
      expect(maxRelDiff(lseT, want.lseT)).toBeLessThan(2e-6);
      for (let r = 0; r < rows; r++)
        expect(Math.abs(loss[r] - want.loss[r])).toBeLessThan(2e-5 * Math.max(1, want.loss[r]));
      let err = 0;
      for (let i = 0; i < grad.length; i++) err = Math.max(err, Math.abs(grad[i] - want.grad[i]));
      // reverse KL: S·(s − p − KL) with |s − p| up to ~30 here, so f32 rounding reaches a few 1e-6
      expect(err).toBeLessThan(1e-5);
      const loss2 = new Float32Array(rows);
      kernels.klDivergenceRows(student, teacher, map, null, loss2, lseS, lseT, { rows, vocab, scale, reverse });
      expect(loss2).toEqual(loss);
      const rowScale = randomF32(rows, next, 2);
      const scaledGrad = new Float32Array(rows * vocab);
      kernels.klDivergenceRows(
        student,
        teacher,
        map,
        scaledGrad,
        loss2,
        lseS,
        lseT,
        { rows, vocab, scale, reverse },
        rowScale,
      );
      let errScaled = 0;
      for (let i = 0; i < grad.length; i++)
        errScaled = Math.max(errScaled, Math.abs(scaledGrad[i] - want.grad[i] * rowScale[Math.floor(i / vocab)]));
      expect(errScaled).toBeLessThan(1e-5 * 2);
    });

  it("klDivergenceRows: a −inf teacher logit contributes 0·log 0 = 0 (forward KL stays finite)", () => {
    const vocab = 9;
    const student = randomF32(vocab, next, 2);
    const teacher = randomF32(vocab, next, 2);
    teacher[2] = Number.NEGATIVE_INFINITY;
    teacher[7] = Number.NEGATIVE_INFINITY;
    const loss = new Float32Array(1);
    const grad = new Float32Array(vocab);
    kernels.klDivergenceRows(student, teacher, null, grad, loss, new Float32Array(1), new Float32Array(1), {
      rows: 1,
      vocab,
      scale: 1,
      reverse: false,
    });
    const want = klRef(student, teacher, null, 1, vocab, 1, false);
    expect(Number.isFinite(loss[0])).toBe(true);
    expect(loss[0]).toBeCloseTo(want.loss[0], 5);
    for (let j = 0; j < vocab; j++) expect(grad[j]).toBeCloseTo(want.grad[j], 6);
  });

  it("klDivergenceRows rejects teacherRows outside the teacher", () => {
    const args = [new Float32Array(6), new Float32Array(6), new Int32Array([0, 2])] as const;
    const out = [null, new Float32Array(2), new Float32Array(2), new Float32Array(2)] as const;
    expect(() => kernels.klDivergenceRows(...args, ...out, { rows: 2, vocab: 3, scale: 1, reverse: false })).toThrow(
      /teacherRows\[1\] = 2 is outside \[0, 2\)/,
    );
  });

  it("softmaxRows validates sizes", () => {
    expect(() => kernels.softmaxRows(new Float32Array(6), new Float32Array(5), new Float32Array(2), 2, 3)).toThrow(
      ShapeError,
    );
    expect(() =>
      kernels.softmaxRows(new Float32Array(6), new Float32Array(6), new Float32Array(2), 2, 3),
    ).not.toThrow();
  });

  it("cross-entropy is stable for huge logits", () => {
    const logits = new Float32Array([1000, 0, -1000, 999]);
    const loss = new Float32Array(1);
    const lse = new Float32Array(1);
    kernels.crossEntropyForward(logits, new Int32Array([3]), loss, lse, 1, 4, -1);
    expect(lse[0]).toBeCloseTo(1000 + Math.log(1 + Math.exp(-1)), 3);
    expect(loss[0]).toBeCloseTo(1 + Math.log(1 + Math.exp(-1)), 3);
  });

  it("cross-entropy rejects targets outside the vocabulary with IndexError", () => {
    const args = [new Float32Array(6), new Int32Array([0, 3]), new Float32Array(2), new Float32Array(2)] as const;
    expect(() => kernels.crossEntropyForward(...args, 2, 3, -100)).toThrow(IndexError);
    expect(() => kernels.crossEntropyForward(...args, 2, 3, -100)).toThrow(/targets\[1\] = 3 is outside \[0, 3\)/);
  });
});
