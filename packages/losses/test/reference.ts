// Independent float64 references for the tests: plain arrays, textbook formulas, no shared code
// with src/. Finite differences run on these, so a gradient test checks the op's backward
// against the derivative of the exact loss.

export type Vec = number[];

export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

export function randomArray(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    // Box-Muller normal
    const u = Math.max(r(), 1e-12);
    const v = r();
    out[i] = scale * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
  return out;
}

export function logSoftmax(row: ArrayLike<number>, temperature = 1): Vec {
  const z = Array.from(row, (v) => v / temperature);
  const m = Math.max(...z);
  const lse = m + Math.log(z.reduce((a, v) => a + Math.exp(v - m), 0));
  return z.map((v) => v - lse);
}

export function rowsOf(data: ArrayLike<number>, V: number): Vec[] {
  const out: Vec[] = [];
  for (let o = 0; o < data.length; o += V) out.push(Array.from({ length: V }, (_, j) => data[o + j]));
  return out;
}

export function kl(a: Vec, b: Vec): number {
  // KL(A‖B) from log-probs a, b.
  let s = 0;
  for (let i = 0; i < a.length; i++) if (Math.exp(a[i]) > 0) s += Math.exp(a[i]) * (a[i] - b[i]);
  return s;
}

/** TRL generalized JSD on log-probs s (student) and p (teacher), with the exact ends. */
export function jsd(s: Vec, p: Vec, beta: number): number {
  if (beta === 0) return kl(p, s);
  if (beta === 1) return kl(s, p);
  const m = s.map((v, i) => Math.log((1 - beta) * Math.exp(v) + beta * Math.exp(p[i])));
  return beta * kl(p, m) + (1 - beta) * kl(s, m);
}

/** SDFT top-k buckets: student's top-k ids (ties → lower id) plus a tail bucket. */
export function topKBuckets(s: Vec, p: Vec, k: number, zs: Vec): { s: Vec; p: Vec } {
  const idx = zs.map((v, i) => [v, i] as const).sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  const top = idx.slice(0, k).map(([, i]) => i);
  const bs = top.map((i) => s[i]);
  const bp = top.map((i) => p[i]);
  // SDPO add_tail: log Σ clamped to ≤ −1e-7, tail = log(1 − e^that)
  const tail = (b: Vec) => Math.log(-Math.expm1(Math.min(Math.log(b.reduce((a, v) => a + Math.exp(v), 0)), -1e-7)));
  bs.push(tail(bs));
  bp.push(tail(bp));
  return { s: bs, p: bp };
}

/** Central finite-difference gradient of f at x (float64). */
export function numericGrad(f: (x: Vec) => number, x: Vec, h = 1e-5): Vec {
  const g: Vec = [];
  const y = [...x];
  for (let i = 0; i < x.length; i++) {
    y[i] = x[i] + h;
    const a = f(y);
    y[i] = x[i] - h;
    const b = f(y);
    y[i] = x[i];
    g.push((a - b) / (2 * h));
  }
  return g;
}

export function logSigmoid(x: number): number {
  return x >= 0 ? -Math.log1p(Math.exp(-x)) : x - Math.log1p(Math.exp(x));
}

/** max |a − b| / (atol + rtol·|b|) ≤ 1 ⇔ close. */
export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, atol: number, rtol = 0): void {
  if (actual.length !== expected.length) throw new Error(`length ${actual.length} ≠ ${expected.length}`);
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i];
    const b = expected[i];
    if (!(Math.abs(a - b) <= atol + rtol * Math.abs(b))) {
      throw new Error(`element ${i}: ${a} vs expected ${b} (atol ${atol}, rtol ${rtol})`);
    }
  }
}
