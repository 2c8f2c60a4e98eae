// llama2.c run.c's sampler, reproduced bit for bit on f32 logits so a seeded run.c sample can be
// replayed: a 64-bit xorshift* generator (state ^= state >> 12; ^= state << 25; ^= state >> 27;
// output the high 32 bits of state · 0x2545F4914F6CDD1D), one coin per token from the top 24 bits,
// then temperature, an f32 softmax and either a CDF walk or run.c's top-p rule. Every step
// rounds to f32 (Math.fround) where run.c computes in `float`.

const MASK64 = (1n << 64n) - 1n;
const MULTIPLIER = 0x2545f4914f6cdd1dn;

/** run.c's `random_u32` / `random_f32` stream for one seed (the 64-bit state kept as a BigInt). */
export class RunCRng {
  private state: bigint;

  constructor(seed: number | bigint) {
    const s = BigInt(seed);
    if (s < 0n || s > MASK64) throw new RangeError(`RunCRng: seed must be an unsigned 64-bit integer, got ${seed}`);
    this.state = s;
  }

  nextU32(): number {
    let s = this.state;
    s ^= s >> 12n;
    s = (s ^ (s << 25n)) & MASK64;
    s ^= s >> 27n;
    this.state = s;
    return Number(((s * MULTIPLIER) & MASK64) >> 32n);
  }

  /** A float in [0, 1) with 24 random bits, exactly as run.c's `random_f32`. */
  nextF32(): number {
    return Math.fround((this.nextU32() >>> 8) / 16777216);
  }
}

const f = Math.fround;

function argmaxFirst(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** run.c's in-place f32 softmax: max, then exp and a running f32 sum, then division. */
function softmaxF32(x: Float32Array): void {
  let max = x[0];
  for (let i = 1; i < x.length; i++) if (x[i] > max) max = x[i];
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    x[i] = Math.exp(f(x[i] - max));
    sum = f(sum + x[i]);
  }
  for (let i = 0; i < x.length; i++) x[i] = x[i] / sum;
}

function sampleCdf(probs: Float32Array, coin: number): number {
  let cdf = 0;
  for (let i = 0; i < probs.length; i++) {
    cdf = f(cdf + probs[i]);
    if (coin < cdf) return i;
  }
  return probs.length - 1;
}

function sampleNucleus(probs: Float32Array, topP: number, coin: number): number {
  const n = probs.length;
  if (n === 1) return 0;
  // run.c drops tokens below (1 − topp) / (n − 1) before sorting: none of them can be in the nucleus.
  const cutoff = f(f(1 - topP) / f(n - 1));
  const kept: number[] = [];
  for (let i = 0; i < n; i++) if (probs[i] >= cutoff) kept.push(i);
  // Descending by probability. run.c's qsort leaves the order of equal probabilities to the C
  // library; index order is what glibc's merge sort gives.
  kept.sort((a, b) => probs[b] - probs[a] || a - b);
  let cumulative = 0;
  let last = kept.length - 1;
  for (let i = 0; i < kept.length; i++) {
    cumulative = f(cumulative + probs[kept[i]]);
    if (cumulative > topP) {
      last = i;
      break;
    }
  }
  const r = f(coin * cumulative);
  let cdf = 0;
  for (let i = 0; i <= last; i++) {
    cdf = f(cdf + probs[kept[i]]);
    if (r < cdf) return kept[i];
  }
  return kept[last];
}

/**
 * One token as run.c's `sample` draws it. `logits` is overwritten (scaled, then probabilities).
 * Temperature 0 is argmax and draws no coin; topP outside (0, 1) samples the full distribution.
 */
export function sampleRunC(logits: Float32Array, temperature: number, topP: number, rng: RunCRng): number {
  const t = f(temperature);
  if (t === 0) return argmaxFirst(logits);
  for (let i = 0; i < logits.length; i++) logits[i] = logits[i] / t;
  softmaxF32(logits);
  const coin = rng.nextF32();
  const p = f(topP);
  return p <= 0 || p >= 1 ? sampleCdf(logits, coin) : sampleNucleus(logits, p, coin);
}
