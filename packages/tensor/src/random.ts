// Counter-based RNG: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11). Output i depends only on (seed, counter i), so the same seed
// gives the same init, dropout masks and samples on every backend and in any order.

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

function mulhi32(a: number, b: number): number {
  const al = a & 0xffff;
  const ah = a >>> 16;
  const bl = b & 0xffff;
  const bh = b >>> 16;
  const ll = al * bl;
  const lh = al * bh;
  const hl = ah * bl;
  const hh = ah * bh;
  const mid = (ll >>> 16) + (lh & 0xffff) + (hl & 0xffff);
  return (hh + (lh >>> 16) + (hl >>> 16) + (mid >>> 16)) >>> 0;
}

/** One Philox4x32-10 block: 4 uint32 outputs for counter (c0..c3) under key (k0, k1). */
export function philox4x32(
  c0: number,
  c1: number,
  c2: number,
  c3: number,
  k0: number,
  k1: number,
  out: Uint32Array,
): void {
  for (let r = 0; r < 10; r++) {
    const hi0 = mulhi32(M0, c0);
    const lo0 = Math.imul(M0, c0) >>> 0;
    const hi1 = mulhi32(M1, c2);
    const lo1 = Math.imul(M1, c2) >>> 0;
    c0 = (hi1 ^ c1 ^ k0) >>> 0;
    c1 = lo1;
    c2 = (hi0 ^ c3 ^ k1) >>> 0;
    c3 = lo0;
    k0 = (k0 + W0) >>> 0;
    k1 = (k1 + W1) >>> 0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/** Fill `out` with uint32s for stream `stream` of `seed`, starting at element `offset`. */
export function randomBits(seed: number, offset: number, out: Uint32Array, stream = 0): void {
  const k0 = seed >>> 0;
  const k1 = Math.floor(seed / 2 ** 32) >>> 0;
  const block = new Uint32Array(4);
  let i = 0;
  let index = offset;
  while (i < out.length) {
    const blockIndex = Math.floor(index / 4);
    philox4x32(blockIndex >>> 0, Math.floor(blockIndex / 2 ** 32) >>> 0, stream >>> 0, 0, k0, k1, block);
    for (let lane = index % 4; lane < 4 && i < out.length; lane++, i++, index++) out[i] = block[lane];
  }
}

/** Uniform [0, 1) floats with 24 random bits each (exactly representable in f32). */
export function uniformFloats(seed: number, offset: number, n: number, stream = 0): Float32Array {
  const bits = new Uint32Array(n);
  randomBits(seed, offset, bits, stream);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (bits[i] >>> 8) * 2 ** -24;
  return out;
}

/** Standard normals by Box–Muller on pairs of uniforms (consumes 2 draws per pair). */
export function normalFloats(seed: number, offset: number, n: number, stream = 0): Float32Array {
  const pairs = Math.ceil(n / 2);
  const bits = new Uint32Array(pairs * 2);
  randomBits(seed, offset, bits, stream);
  const out = new Float32Array(n);
  for (let p = 0; p < pairs; p++) {
    const u1 = ((bits[2 * p] >>> 8) + 1) * 2 ** -24; // (0, 1]: log is finite
    const u2 = (bits[2 * p + 1] >>> 8) * 2 ** -24;
    const r = Math.sqrt(-2 * Math.log(u1));
    out[2 * p] = r * Math.cos(2 * Math.PI * u2);
    if (2 * p + 1 < n) out[2 * p + 1] = r * Math.sin(2 * Math.PI * u2);
  }
  return out;
}

/**
 * A seeded generator that hands out non-overlapping counter ranges, so successive draws
 * differ while the whole sequence is reproducible from the seed.
 */
export class Rng {
  private counter = 0;
  constructor(
    readonly seed: number,
    readonly stream = 0,
  ) {
    if (!Number.isSafeInteger(seed) || seed < 0)
      throw new RangeError(`Rng: seed must be a non-negative safe integer, got ${seed}`);
  }

  /** Current counter position (save it to resume the stream). */
  get offset(): number {
    return this.counter;
  }

  set offset(value: number) {
    this.counter = value;
  }

  uniform(n: number): Float32Array {
    const out = uniformFloats(this.seed, this.counter, n, this.stream);
    this.counter += n;
    return out;
  }

  normal(n: number): Float32Array {
    const out = normalFloats(this.seed, this.counter, n, this.stream);
    this.counter += Math.ceil(n / 2) * 2;
    return out;
  }

  /** A uniform float in [0, 1) (as a JS number). */
  next(): number {
    return this.uniform(1)[0];
  }

  /** An independent generator for a sub-task (another stream of the same seed). */
  fork(stream: number): Rng {
    return new Rng(this.seed, stream);
  }
}

// A process-wide sequence that modules draw fresh counter ranges from (e.g. LoRA dropout: one
// tick per forward). `checkpoint` rewinds it while recomputing a block, so the recomputed
// forward draws exactly the masks the original forward drew.
let rngSequence = 0;

/** The next value of the shared RNG sequence (use it to pick a fresh counter offset). */
export function nextRngSequence(): number {
  return rngSequence++;
}

/** Current position of the shared RNG sequence (for save / rewind). */
export function rngSequencePosition(): number {
  return rngSequence;
}

export function setRngSequencePosition(position: number): void {
  rngSequence = position;
}
