// Deterministic generator of random and mutated safetensors files, shared by the CI fuzz test
// (a few thousand inputs) and bench/fuzz.ts (≥ 100,000 inputs).
import { DTYPES, type Dtype, byteSize, serializeSafetensors } from "../src/index.js";

export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NASTY_NUMBERS = [
  "0",
  "1",
  "-1",
  "1.5",
  "1e400",
  "-0",
  "9007199254740991",
  "9007199254740992",
  "9007199254740993",
  "18446744073709551615",
  "18446744073709551616",
  "4294967296",
  "100000001",
  "1e3",
  "NaN",
  "null",
  '"3"',
  "[]",
  "{}",
];

function u64le(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, v & 0xffffffffffffffffn, true);
  return b;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

function validFile(r: () => number): Uint8Array {
  const n = Math.floor(r() * 4);
  const tensors: Record<string, { dtype: Dtype; shape: number[]; data: Uint8Array }> = {};
  for (let i = 0; i < n; i++) {
    const dtype = DTYPES[Math.floor(r() * DTYPES.length)];
    const shape = Array.from({ length: Math.floor(r() * 3) }, () => Math.floor(r() * 4));
    if (dtype === "F4" || dtype.startsWith("F6")) shape.push(8);
    const data = new Uint8Array(byteSize(dtype, shape));
    for (let j = 0; j < data.length; j++) data[j] = Math.floor(r() * 256);
    tensors[`t${i}.${Math.floor(r() * 1000)}`] = { dtype, shape, data };
  }
  return serializeSafetensors(tensors, r() < 0.5 ? { format: "pt" } : undefined);
}

/** One fuzz input: random bytes, a valid file, or a mutation of one (header text, size prefix, length). */
export function fuzzInput(r: () => number): Uint8Array {
  const kind = Math.floor(r() * 7);
  if (kind === 0) {
    const b = new Uint8Array(Math.floor(r() * 120));
    for (let i = 0; i < b.length; i++) b[i] = Math.floor(r() * 256);
    return b;
  }
  const base = validFile(r);
  if (kind === 1) return base;
  const n = Number(new DataView(base.buffer).getBigUint64(0, true));
  const header = new TextDecoder().decode(base.subarray(8, 8 + n));
  const data = base.subarray(8 + n);
  if (kind === 2) {
    // Flip bytes anywhere.
    const b = base.slice();
    for (let k = 0; k < 1 + r() * 4; k++) b[Math.floor(r() * b.length)] ^= 1 << Math.floor(r() * 8);
    return b;
  }
  if (kind === 3) {
    // Replace a number in the header with a nasty one, keeping the size prefix right.
    const nums = [...header.matchAll(/-?\d+/g)];
    let h = header;
    if (nums.length > 0) {
      const m = nums[Math.floor(r() * nums.length)];
      h = h.slice(0, m.index) + NASTY_NUMBERS[Math.floor(r() * NASTY_NUMBERS.length)] + h.slice(m.index! + m[0].length);
    }
    const hb = new TextEncoder().encode(h);
    return concat(u64le(BigInt(hb.length)), hb, data);
  }
  if (kind === 4) {
    // Corrupt the size prefix: huge, zero, off by a little.
    const choices = [
      0n,
      1n,
      BigInt(n) - 1n,
      BigInt(n) + 1n,
      2n ** 63n,
      2n ** 32n + BigInt(n),
      100_000_001n,
      BigInt(Math.floor(r() * 2 ** 40)),
    ];
    return concat(u64le(choices[Math.floor(r() * choices.length)]), base.subarray(8));
  }
  if (kind === 5) {
    // Truncate or extend.
    if (r() < 0.5) return base.subarray(0, Math.floor(r() * base.length));
    return concat(base, new Uint8Array(1 + Math.floor(r() * 16)));
  }
  // Structural JSON edits: swap dtypes, duplicate entries, odd metadata, whitespace.
  const edits: ((h: string) => string)[] = [
    (h) => h.replace(/"dtype":"[A-Z0-9_]+"/, `"dtype":"${["F12", "f32", "", "U128"][Math.floor(r() * 4)]}"`),
    (h) => h.replace(/"data_offsets":\[(\d+),(\d+)\]/, (_, a, b) => `"data_offsets":[${b},${a}]`),
    (h) => h.replace(/^\{/, '{"__metadata__":{"x":{"y":1}},'),
    (h) =>
      h.replace(
        /^\{/,
        '{"dup":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"dup":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},',
      ),
    (h) => `\t\n ${h.trim()} \r`,
    (h) => h.replace(/"shape":\[[^\]]*\]/, '"shape":[4294967296,4294967296,4294967296]'),
    (h) => h.slice(0, Math.floor(r() * h.length)),
  ];
  const h = edits[Math.floor(r() * edits.length)](header);
  const hb = new TextEncoder().encode(h);
  return concat(u64le(BigInt(hb.length)), hb, data);
}
