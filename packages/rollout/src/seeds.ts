// Deterministic seeds and hashing. Every random choice in a rollout derives from the
// episode seed, so the same seed reproduces the same trajectory in-process and over HTTP.

/** 32-bit FNV-1a over the UTF-16 code units of `text` (FNV spec, offset basis 2166136261, prime 16777619). */
export function fnv1a32(text: string, basis = 0x811c9dc5): number {
  let h = basis >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** A 64-bit-ish hex digest (two FNV-1a passes with different bases): enough for ids, not for security. */
export function hashHex(text: string): string {
  const a = fnv1a32(text);
  const b = fnv1a32(text, 0x9e3779b9);
  return a.toString(16).padStart(8, "0") + b.toString(16).padStart(8, "0");
}

/** Derive a uint32 seed from a base seed and labels (turn index, branch index, ...). */
export function deriveSeed(base: number, ...parts: (string | number)[]): number {
  return fnv1a32(`${base >>> 0}/${parts.join("/")}`);
}

/** mulberry32: a small, fast, seedable PRNG returning floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
