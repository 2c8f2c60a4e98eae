import { describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { checkOp, randomTensor } from "./helpers.js";

const erf64 = (x: number) => {
  // Reference erf by series/continued fraction in double (independent of the kernel's Cody form).
  const t = Math.abs(x);
  if (t < 2.5) {
    let sum = t;
    let term = t;
    for (let n = 1; n < 80; n++) {
      term *= (-t * t) / n;
      sum += term / (2 * n + 1);
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc continued fraction for large |x|
  let f = 0;
  for (let n = 60; n >= 1; n--) f = n / 2 / (t + f);
  const erfc = Math.exp(-t * t) / Math.sqrt(Math.PI) / (t + f);
  return Math.sign(x) * (1 - erfc);
};

const unaryCases: [string, (t: T.Tensor) => T.Tensor, (x: number) => number, number, number][] = [
  ["neg", T.neg, (x) => -x, -2, 2],
  ["exp", T.exp, Math.exp, -2, 2],
  ["log", T.log, Math.log, 0.2, 3],
  ["sqrt", T.sqrt, Math.sqrt, 0.2, 3],
  ["rsqrt", T.rsqrt, (x) => 1 / Math.sqrt(x), 0.2, 3],
  ["tanh", T.tanh, Math.tanh, -2, 2],
  ["sigmoid", T.sigmoid, (x) => 1 / (1 + Math.exp(-x)), -4, 4],
  ["silu", T.silu, (x) => x / (1 + Math.exp(-x)), -4, 4],
  ["gelu", T.gelu, (x) => 0.5 * x * (1 + erf64(x / Math.SQRT2)), -4, 4],
  ["geluTanh", T.geluTanh, (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))), -4, 4],
  ["relu", T.relu, (x) => Math.max(0, x), -2, 2],
  ["softplus", T.softplus, (x) => (x > 20 ? x : Math.log1p(Math.exp(x))), -5, 5],
  ["abs", T.abs, Math.abs, -2, 2],
  ["square", T.square, (x) => x * x, -2, 2],
];

describe("unary ops", () => {
  for (const [name, op, f, lo, hi] of unaryCases) {
    it(`${name}: forward vs float64, gradient vs finite differences`, () => {
      checkOp({ inputs: [randomTensor([3, 7], lo, hi)], op, ref: (x) => x.map(f) });
    });
  }

  it("erf matches known values to 1e-7", () => {
    const known: [number, number][] = [
      [0.1, 0.1124629160182849],
      [0.5, 0.5204998778130465],
      [1, 0.8427007929497149],
      [2, 0.9953222650189527],
      [3, 0.9999779095030014],
      [-0.7, -0.6778011938374184],
    ];
    for (const [x, y] of known) expect(Math.abs(T.erf(x) - y)).toBeLessThan(1e-12);
  });

  it("clamp passes gradient only inside [min, max]", () => {
    checkOp({
      inputs: [randomTensor([4, 5], -2, 2)],
      op: (x) => T.clamp(x, -0.5, 0.7),
      ref: (x) => x.map((v) => Math.min(0.7, Math.max(-0.5, v))),
    });
  });
});

describe("binary ops with broadcasting", () => {
  const cases: [string, (a: T.Tensor, b: T.Tensor) => T.Tensor, (a: number, b: number) => number][] = [
    ["add", T.add, (a, b) => a + b],
    ["sub", T.sub, (a, b) => a - b],
    ["mul", T.mul, (a, b) => a * b],
    ["div", T.div, (a, b) => a / b],
    ["pow", T.pow, (a, b) => a ** b],
    ["maximum", T.maximum, (a, b) => Math.max(a, b)],
  ];
  const shapes: [number[], number[]][] = [
    [
      [3, 4],
      [3, 4],
    ],
    [[2, 3, 4], [4]],
    [
      [2, 1, 4],
      [3, 1],
    ],
    [[5], []],
  ];
  for (const [name, op, f] of cases) {
    for (const [sa, sb] of shapes) {
      it(`${name} ${JSON.stringify(sa)} ⊕ ${JSON.stringify(sb)}`, () => {
        const out = T.broadcastShapes("t", sa, sb);
        const positive = name === "pow" || name === "div";
        const a = randomTensor(sa, positive ? 0.5 : -2, 2);
        const b = randomTensor(sb, positive ? 0.5 : -2, 2);
        checkOp({
          inputs: [a, b],
          op,
          ref: (x, y) => {
            const n = out.reduce((p, q) => p * q, 1);
            const r = new Float64Array(n);
            const sx = T.broadcastTo(
              new T.Tensor(
                Float32Array.from(x, (_, i) => i),
                sa,
              ),
              out,
            ).toFloat32Array();
            const sy = T.broadcastTo(
              new T.Tensor(
                Float32Array.from(y, (_, i) => i),
                sb,
              ),
              out,
            ).toFloat32Array();
            for (let i = 0; i < n; i++) r[i] = f(x[sx[i]], y[sy[i]]);
            return r;
          },
        });
      });
    }
  }

  it("scalar right operands", () => {
    checkOp({
      inputs: [randomTensor([6])],
      op: (a) => T.mul(T.add(a, 1.5), 3),
      ref: (x) => x.map((v) => (v + 1.5) * 3),
    });
  });

  it("where selects and routes gradients", () => {
    const cond = new T.Tensor(Float32Array.of(1, 0, 1, 0, 0, 1), [2, 3]);
    checkOp({
      inputs: [randomTensor([2, 3]), randomTensor([3])],
      op: (a, b) => T.where(cond, a, b),
      ref: (a, b) => Float64Array.from({ length: 6 }, (_, i) => (cond.dataSync()[i] ? a[i] : b[i % 3])),
    });
  });

  it("rejects incompatible shapes with a ShapeError naming both", () => {
    expect(() => T.add(randomTensor([2, 3]), randomTensor([4]))).toThrowError(/add: shapes \[2, 3\] and \[4\]/);
    expect(() => T.add(randomTensor([2, 3]), randomTensor([4]))).toThrowError(T.ShapeError);
  });

  it("rejects i32 tensors in float math", () => {
    expect(() => T.exp(T.tensor([1, 2], [2], "i32"))).toThrowError(T.DTypeError);
  });
});
