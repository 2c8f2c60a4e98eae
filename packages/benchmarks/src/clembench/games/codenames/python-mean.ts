// Python's `statistics.mean` on ints and floats: the exact rational mean, returned as an int when every input
// is an int and the mean is whole, otherwise as the correctly rounded float (`_sum` / `_convert`).
import { PyFloat, decomposeDouble } from "../../py.js";

/** A Python number: a plain JS number is an int, a PyFloat a float. */
export type PyNum = number | PyFloat;

function toRational(x: number): [bigint, bigint] {
  if (Number.isInteger(x) && Math.abs(x) <= Number.MAX_SAFE_INTEGER) return [BigInt(x), 1n];
  const { mant, exp } = decomposeDouble(x);
  return exp >= 0 ? [mant << BigInt(exp), 1n] : [mant, 1n << BigInt(-exp)];
}

const bitLength = (n: bigint) => n.toString(2).length;

/** The double nearest to p/q (ties to even), as Python's int / int and float(Fraction) give. */
export function rationalToDouble(p: bigint, q: bigint): number {
  if (q <= 0n) throw new RangeError("rationalToDouble: the denominator must be positive");
  if (p === 0n) return 0;
  const neg = p < 0n;
  const a = neg ? -p : p;
  // scale so that the quotient has 53 significant bits: m = floor(a * 2^-e / q), 2^52 <= m < 2^53
  let e = bitLength(a) - bitLength(q) - 53;
  const quot = (s: number): [bigint, bigint, bigint] => {
    const num = s < 0 ? a << BigInt(-s) : a;
    const den = s > 0 ? q << BigInt(s) : q;
    return [num / den, num % den, den];
  };
  let [m, r, den] = quot(e);
  while (m >= 1n << 53n) [m, r, den] = quot(++e);
  while (m < 1n << 52n) [m, r, den] = quot(--e);
  if (2n * r > den || (2n * r === den && m % 2n === 1n)) m += 1n;
  if (m === 1n << 53n) {
    m >>= 1n;
    e += 1;
  }
  const x = Number(m) * 2 ** e; // exact for the normal range used here
  return neg ? -x : x;
}

export function pyMean(values: readonly PyNum[]): PyNum {
  if (values.length === 0) throw new RangeError("mean requires at least one data point");
  const isFloat = values.some((v) => v instanceof PyFloat);
  let num = 0n;
  let den = 1n;
  for (const v of values) {
    const [p, q] = toRational(v instanceof PyFloat ? v.value : v);
    // den and q are powers of two: the larger one is a common denominator
    if (q > den) {
      num *= q / den;
      den = q;
    }
    num += p * (den / q);
  }
  den *= BigInt(values.length);
  if (!isFloat && num % den === 0n) return Number(num / den);
  return new PyFloat(rationalToDouble(num, den));
}
