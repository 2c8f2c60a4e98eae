// A small seeded PRNG whose whole state is plain JSON, so a saved world state
// resumes the exact random stream (questworld.md, "Determinism, states and seeds").
// Generator: sfc32 (Chris Doty-Humphrey's Small Fast Counting generator, PractRand-clean);
// seeding: splitmix32 expands one integer seed into the four state words.

export interface PrngState {
  /** The integer seed the stream was started from. */
  seed: number;
  /** The four sfc32 state words (unsigned 32-bit integers). */
  s: [number, number, number, number];
}

function splitmix32(x: number): [number, number] {
  const next = (x + 0x9e3779b9) >>> 0;
  let z = next;
  z = Math.imul(z ^ (z >>> 16), 0x21f0aaad) >>> 0;
  z = Math.imul(z ^ (z >>> 15), 0x735a2d97) >>> 0;
  return [next, (z ^ (z >>> 15)) >>> 0];
}

/** Start a stream from an integer seed (any safe integer; negatives and > 2^32 are folded in). */
export function seedPrng(seed: number): PrngState {
  // Fold the high bits in so seeds that differ only above bit 32 still differ.
  let x = (seed >>> 0) ^ Math.floor(Math.abs(seed) / 0x1_0000_0000) ^ (seed < 0 ? 0x5bd1e995 : 0);
  const s: number[] = [];
  for (let i = 0; i < 4; i++) {
    const [nx, out] = splitmix32(x);
    x = nx;
    s.push(out);
  }
  const st: PrngState = { seed, s: [s[0], s[1], s[2], s[3]] };
  // Discard a few outputs: sfc32's first draws are weakly mixed.
  for (let i = 0; i < 12; i++) nextUint32(st);
  return st;
}

/** Next unsigned 32-bit output; advances `st` in place. */
export function nextUint32(st: PrngState): number {
  let [a, b, c, d] = st.s;
  const t = (((a + b) >>> 0) + d) >>> 0;
  d = (d + 1) >>> 0;
  a = b ^ (b >>> 9);
  b = (c + (c << 3)) >>> 0;
  c = ((c << 21) | (c >>> 11)) >>> 0;
  c = (c + t) >>> 0;
  st.s = [a >>> 0, b, c, d];
  return t;
}

/** Uniform float in [0, 1); advances `st` in place. */
export function nextFloat(st: PrngState): number {
  return nextUint32(st) / 0x1_0000_0000;
}

/** Uniform integer in [0, n); advances `st` in place. */
export function nextInt(st: PrngState, n: number): number {
  return Math.floor(nextFloat(st) * n);
}
