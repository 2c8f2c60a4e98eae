// Upstream's per-trial seeds: `random.seed(300)` then `random.randint(0, 10**6)` per trial
// (tau2 src/tau2/runner/batch.py), giving [626729, 373753, 361454, 1567, …]. That needs
// CPython's Mersenne Twister (MT19937, init_by_array seeding from the int's 32-bit words) and
// its `_randbelow` rejection sampling via getrandbits.

/** CPython's `random.Random` restricted to what seed drawing needs. */
export class PythonRandom {
  private readonly mt = new Uint32Array(624);
  private mti = 625;

  constructor(seed: number) {
    this.seed(seed);
  }

  /** `random.seed(n)` for a non-negative integer n (< 2^53). */
  seed(n: number): void {
    let v = Math.abs(Math.trunc(n));
    const key: number[] = [];
    do {
      key.push(v % 0x100000000);
      v = Math.floor(v / 0x100000000);
    } while (v > 0);
    this.initByArray(key);
  }

  private initGenrand(s: number): void {
    const mt = this.mt;
    mt[0] = s >>> 0;
    for (let i = 1; i < 624; i++) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.mti = 624;
  }

  private initByArray(key: number[]): void {
    const mt = this.mt;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(624, key.length); k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1664525)) + key[j] + j) >>> 0;
      i++;
      j++;
      if (i >= 624) {
        mt[0] = mt[623];
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = 623; k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1566083941)) - i) >>> 0;
      i++;
      if (i >= 624) {
        mt[0] = mt[623];
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }

  /** genrand_uint32. */
  private next32(): number {
    const mt = this.mt;
    if (this.mti >= 624) {
      for (let k = 0; k < 624; k++) {
        const y = (mt[k] & 0x80000000) | (mt[(k + 1) % 624] & 0x7fffffff);
        mt[k] = mt[(k + 397) % 624] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      this.mti = 0;
    }
    let y = mt[this.mti++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** `getrandbits(k)` for 0 < k <= 32. */
  getrandbits(k: number): number {
    return this.next32() >>> (32 - k);
  }

  /** `randint(a, b)` for b - a + 1 <= 2^32. */
  randint(a: number, b: number): number {
    const n = b - a + 1;
    const k = Math.floor(Math.log2(n)) + 1; // n.bit_length()
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return a + r;
  }
}

/** The seeds upstream gives trials 0..n-1 (base seed 300 by default). */
export function upstreamTrialSeeds(numTrials: number, baseSeed = 300): number[] {
  const rng = new PythonRandom(baseSeed);
  return Array.from({ length: numTrials }, () => rng.randint(0, 1_000_000));
}
