// CPython's `random.sample` (Lib/random.py), which the codenames mock opponent draws with after
// `random.seed(42)` at benchmark start (clembench `codenames/master.py`, `_opponent_turn`).
import type { PythonRandom } from "../../../tau2/python-random.js";

/** `_randbelow_with_getrandbits(n)`: rejection sampling on `n.bit_length()` random bits. */
export function randbelow(rng: PythonRandom, n: number): number {
  // getrandbits(k) is ported for k <= 32, i.e. n < 2^32
  if (!Number.isInteger(n) || n < 1 || n >= 2 ** 32)
    throw new RangeError(`randbelow: n must be in [1, 2^32), got ${n}`);
  const k = n.toString(2).length; // n.bit_length()
  let r = rng.getrandbits(k);
  while (r >= n) r = rng.getrandbits(k);
  return r;
}

/**
 * `random.sample(population, k)`. For the small populations of codenames CPython takes the pool branch
 * (n <= setsize, 21 for k <= 5): draw an index below n − i and move the last unselected item into its place.
 * The set branch (large n) is not needed here and is refused.
 */
export function pySample<T>(rng: PythonRandom, population: readonly T[], k: number): T[] {
  const n = population.length;
  if (!Number.isInteger(k) || k < 0 || k > n)
    throw new RangeError(`sample: k must be an integer in [0, ${n}] (Sample larger than population or is negative)`);
  let setsize = 21;
  if (k > 5) setsize += 4 ** Math.ceil(Math.log(k * 3) / Math.log(4));
  if (n > setsize) throw new RangeError(`sample: populations above ${setsize} items (the set branch) are not ported`);
  const pool = [...population];
  const result: T[] = [];
  for (let i = 0; i < k; i++) {
    const j = randbelow(rng, n - i);
    result.push(pool[j]);
    pool[j] = pool[n - i - 1];
  }
  return result;
}
