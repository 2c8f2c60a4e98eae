// Summary statistics of per-episode (or per-task) values: n, mean, the standard error of the
// mean (sample standard deviation / √n, n − 1 in the variance), and the paired difference of two
// evaluations of the same instances (Δ = mean of per-instance differences, SE of those
// differences) — the figures every kiln report prints as "mean ± SE" and "Δ ± SE".

export interface MeanSe {
  n: number;
  mean: number;
  /** Standard error of the mean; 0 for n = 1, NaN for n = 0. */
  se: number;
}

export function meanSe(values: readonly number[]): MeanSe {
  const n = values.length;
  if (n === 0) return { n: 0, mean: Number.NaN, se: Number.NaN };
  let sum = 0;
  for (const v of values) sum += v;
  const mean = sum / n;
  if (n < 2) return { n, mean, se: 0 };
  let sq = 0;
  for (const v of values) sq += (v - mean) ** 2;
  return { n, mean, se: Math.sqrt(sq / (n - 1) / n) };
}

export interface PairedDelta extends MeanSe {
  /** Mean of `after` and of `before` over the paired instances. */
  after: number;
  before: number;
}

/**
 * Paired Δ = after − before over instances present in both (matched by key), with the SE of the
 * per-instance differences — smaller than the unpaired SE when the instances vary in difficulty.
 */
export function pairedDelta(
  after: ReadonlyMap<string, number> | Record<string, number>,
  before: ReadonlyMap<string, number> | Record<string, number>,
): PairedDelta {
  const a = after instanceof Map ? after : new Map(Object.entries(after));
  const b = before instanceof Map ? before : new Map(Object.entries(before));
  const diffs: number[] = [];
  let sa = 0;
  let sb = 0;
  for (const [k, v] of a) {
    const w = b.get(k);
    if (w === undefined) continue;
    diffs.push(v - w);
    sa += v;
    sb += w;
  }
  const d = meanSe(diffs);
  return { ...d, after: d.n ? sa / d.n : Number.NaN, before: d.n ? sb / d.n : Number.NaN };
}

/** "0.412 ± 0.051" (or "n/a" for NaN) with `digits` decimals. */
export function formatMeanSe(x: Pick<MeanSe, "mean" | "se">, digits = 3): string {
  if (!Number.isFinite(x.mean)) return "n/a";
  return `${x.mean.toFixed(digits)} ± ${Number.isFinite(x.se) ? x.se.toFixed(digits) : "n/a"}`;
}
