// Archive fuzzer: mutated gzip and zip inputs either decode or throw ArchiveError, never anything
// else, and never inflate past the cap. Runs ~2 s in the test suite; KILN_FUZZ_SECONDS=N runs longer.
import { strToU8, zipSync } from "fflate";
import { describe, expect, it } from "vitest";
import { ArchiveError, gunzip, gzip, unzipSafe } from "../src/index.js";
import { rng } from "./fuzz-inputs.js";

const seconds = Number(process.env.KILN_FUZZ_SECONDS ?? 2);
const CAP = 1 << 20;

function randomText(r: () => number, n: number): string {
  const words = ["ep", "-", "00042", "turn", '{"a":1}', "\n", "zz", "héllo", "🙂"];
  let s = "";
  while (s.length < n) s += words[Math.floor(r() * words.length)];
  return s;
}

function seeds(r: () => number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let k = 0; k < 6; k++) {
    const a = gzip(strToU8(randomText(r, 50 + Math.floor(r() * 2000))), (k % 10) as 0 | 6 | 9);
    const b = gzip(strToU8(randomText(r, 10 + Math.floor(r() * 300))));
    out.push(a, new Uint8Array([...a, ...b]));
    const files: Record<string, Uint8Array> = {};
    for (let f = 0; f < 1 + Math.floor(r() * 4); f++)
      files[`d${f % 2}/f${f}.txt`] = strToU8(randomText(r, Math.floor(r() * 3000)));
    out.push(zipSync(files, { level: k % 2 === 0 ? 0 : 6 }));
  }
  return out;
}

function mutate(r: () => number, input: Uint8Array): Uint8Array {
  let b = new Uint8Array(input);
  const edits = 1 + Math.floor(r() * 4);
  for (let e = 0; e < edits; e++) {
    const kind = Math.floor(r() * 6);
    const at = Math.floor(r() * Math.max(1, b.length));
    if (kind === 0 && b.length) b[at] ^= 1 << Math.floor(r() * 8);
    else if (kind === 1 && b.length) b[at] = Math.floor(r() * 256);
    else if (kind === 2) b = b.subarray(0, at);
    else if (kind === 3)
      b = new Uint8Array([...b, ...Array.from({ length: 1 + Math.floor(r() * 16) }, () => Math.floor(r() * 256))]);
    else if (kind === 4 && b.length >= at + 4)
      new DataView(b.buffer, b.byteOffset).setUint32(at, Math.floor(r() * 2 ** 32), true);
    else if (kind === 5) b = new Uint8Array([...b.subarray(0, at), ...b.subarray(at, at + 64), ...b.subarray(at)]);
  }
  return b;
}

describe(`archive fuzz (${seconds} s; KILN_FUZZ_SECONDS to change)`, () => {
  it("every mutated gzip or zip decodes within the cap or throws ArchiveError", () => {
    const r = rng(21);
    const base = seeds(r);
    const rules = new Map<string, number>();
    let decoded = 0;
    let runs = 0;
    const t0 = performance.now();
    while (runs < 200 || performance.now() - t0 < seconds * 1000) {
      const input = mutate(r, base[runs % base.length]);
      runs++;
      const isZip = input[0] === 0x50;
      try {
        if (isZip) {
          let total = 0;
          for (const v of unzipSafe(input, CAP).values()) total += v.length;
          expect(total).toBeLessThanOrEqual(CAP);
        } else expect(gunzip(input, CAP).length).toBeLessThanOrEqual(CAP);
        decoded++;
      } catch (e) {
        if (!(e instanceof ArchiveError)) throw new Error(`run ${runs}: ${(e as Error).stack}`);
        rules.set(e.rule, (rules.get(e.rule) ?? 0) + 1);
      }
    }
    expect(runs).toBeGreaterThanOrEqual(200);
    // Most mutations must be caught; the ones that decode are e.g. changes to gzip header fields.
    expect(rules.get("Checksum") ?? 0).toBeGreaterThan(0);
    expect(decoded).toBeLessThan(runs);
  });
});
