// Regression tests for hostile archives: caps that bound memory, integrity checks, and extraction
// that never follows links or leaves partial output.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync as zlibGzip } from "node:zlib";
import { strToU8, zipSync } from "fflate";
import { afterAll, describe, expect, it } from "vitest";
import { ArchiveError, extractZip, gunzip, gzip, readJsonlGz, unzipSafe, zipFiles } from "../src/index.js";
import { tempDir } from "./helpers.js";

/** A real garbage collection, so the memory baseline holds live objects only. */
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;
const tmp = tempDir();
afterAll(tmp.cleanup);
const MiB = 1024 * 1024;

/** `mib` MiB of zeros gzipped by zlib (the zeros are calloc'ed pages, never touched by us). */
let bombBytes: Uint8Array | undefined;
/** 48 MiB of zeros gzipped by zlib (calloc'ed pages that are never written), made once. */
const bomb = () => {
  bombBytes ??= new Uint8Array(zlibGzip(Buffer.alloc(48 * MiB), { level: 6 }));
  return bombBytes;
};

function rule(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof ArchiveError) return e.rule;
    throw e;
  }
  return undefined;
}

describe("decompression caps bound memory", () => {
  it("gunzip stops a gzip bomb near the cap instead of inflating it first", () => {
    const gz = bomb();
    expect(gz.length).toBeLessThan(MiB);
    collectGarbage();
    const before = process.memoryUsage().arrayBuffers;
    expect(rule(() => gunzip(gz, 2 * MiB))).toBe("TooLarge");
    // Inflating first and checking after (the old behaviour) holds all 48 MiB at this point.
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(24 * MiB);
  });

  it("readJsonlGz refuses a bomb and non-gzip input with ArchiveError, never a TypeError", async () => {
    const path = join(tmp.dir, "bomb.jsonl.gz");
    writeFileSync(path, bomb());
    await expect(readJsonlGz(path, 4 * MiB)).rejects.toMatchObject({ name: "ArchiveError", rule: "TooLarge" });
    // A file too large to inflate within the cap at any ratio is refused before it is read.
    await expect(readJsonlGz(path, 1)).rejects.toMatchObject({ rule: "TooLarge" });
    writeFileSync(path, gzip(new Uint8Array(1000).fill(0xff))); // inflates to bytes that are not UTF-8 JSON
    await expect(readJsonlGz(path)).rejects.toBeInstanceOf(ArchiveError);
    writeFileSync(path, "plain text, not gzip");
    await expect(readJsonlGz(path)).rejects.toBeInstanceOf(ArchiveError);
    await expect(readJsonlGz(path, Number.NaN)).rejects.toBeInstanceOf(ArchiveError);
  });

  it("a zip bomb is refused from its declared sizes before anything is inflated", () => {
    // Two small entries that declare 3 GiB each: the cap is checked against the declarations.
    const small = zipSync({ "a.bin": new Uint8Array(1000), "b.bin": new Uint8Array(1000) }, { level: 9 });
    const z = patchZipSize(patchZipSize(small, "a.bin", 3 * 1024 * MiB), "b.bin", 3 * 1024 * MiB);
    collectGarbage();
    const before = process.memoryUsage().arrayBuffers;
    expect(rule(() => unzipSafe(z, 100 * MiB))).toBe("TooLarge");
    expect(rule(() => unzipSafe(z))).toBe("TooLarge"); // 6 GiB > the 4 GiB default
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 * MiB);
  });

  it("a zip entry that declares fewer bytes than its data stops at the declared size", () => {
    const z = zipSync({ "a.txt": strToU8("x".repeat(5000)) }, { level: 9 });
    const patched = patchZipSize(z, "a.txt", 100);
    expect(() => unzipSafe(patched)).toThrow(/inflates beyond its declared size of 100 bytes/);
    expect(rule(() => unzipSafe(patchZipSize(z, "a.txt", 6000)))).toBe("Checksum");
  });
});

/** Rewrites an entry's uncompressed size in both its local and central headers. */
function patchZipSize(zip: Uint8Array, name: string, size: number): Uint8Array {
  const out = new Uint8Array(zip);
  const view = new DataView(out.buffer);
  const nameBytes = strToU8(name);
  for (let i = 0; i + 4 <= out.length; i++) {
    const sig = view.getUint32(i, true);
    const at = sig === 0x04034b50 ? 22 : sig === 0x02014b50 ? 24 : -1;
    const nameAt = sig === 0x04034b50 ? 30 : 46;
    if (at < 0) continue;
    if (Buffer.from(out.subarray(i + nameAt, i + nameAt + nameBytes.length)).equals(Buffer.from(nameBytes)))
      view.setUint32(i + at, size, true);
  }
  return out;
}

describe("integrity", () => {
  it("gzip: a changed byte, a missing trailer and trailing garbage are errors", () => {
    const text = strToU8('{"episode":"ep-00042"}\n');
    const gz = gzip(text, 0); // stored: the text is in the stream as is
    const i = Buffer.from(gz).indexOf("ep-00042");
    const changed = new Uint8Array(gz);
    changed[i + 1] = "q".charCodeAt(0);
    expect(rule(() => gunzip(changed))).toBe("Checksum");
    expect(() => gunzip(gz.subarray(0, gz.length - 8))).toThrow(ArchiveError);
    expect(() => gunzip(gz.subarray(0, gz.length - 3))).toThrow(ArchiveError);
    for (const extra of [[0], [1, 2, 3], [0x1f], [9, 9, 9, 9, 9, 9, 9, 9, 9, 9]])
      expect(() => gunzip(new Uint8Array([...gz, ...extra]))).toThrow(ArchiveError);
    // Two members (as `cat a.gz b.gz`) are one valid stream, each member checked.
    const two = new Uint8Array([...gz, ...gzip(strToU8("more\n"))]);
    expect(new TextDecoder().decode(gunzip(two))).toBe('{"episode":"ep-00042"}\nmore\n');
    const badSecond = new Uint8Array(two);
    badSecond[badSecond.length - 5] ^= 1; // ISIZE of the second member
    expect(rule(() => gunzip(badSecond))).toBe("Checksum");
  });

  it("zip: CRC-32 is verified, stored sizes must agree, trailing bytes are refused", () => {
    const z = zipSync({ "ep.txt": strToU8("ep-00042") }, { level: 0 });
    const i = Buffer.from(z).indexOf("ep-00042");
    const changed = new Uint8Array(z);
    changed[i + 1] = "q".charCodeAt(0);
    expect(rule(() => unzipSafe(changed))).toBe("Checksum");
    expect(rule(() => unzipSafe(patchZipSize(z, "ep.txt", 4)))).toBe("Checksum");
    expect(rule(() => unzipSafe(new Uint8Array([...z, 1, 2, 3])))).toBe("TrailingData");
    expect(rule(() => unzipSafe(z.subarray(0, z.length - 30)))).toBe("Corrupt");
    expect(new TextDecoder().decode(unzipSafe(z).get("ep.txt"))).toBe("ep-00042");
  });
});

describe("extraction", () => {
  it("never follows a symbolic link already in the destination", async () => {
    const outside = join(tmp.dir, "outside");
    mkdirSync(outside, { recursive: true });
    const dest = join(tmp.dir, "dest-link");
    mkdirSync(dest, { recursive: true });
    symlinkSync(outside, join(dest, "sub"));
    writeFileSync(join(outside, "target.txt"), "original");
    symlinkSync(join(outside, "target.txt"), join(dest, "file.txt"));
    await expect(extractZip(zipFiles({ "sub/evil.txt": "pwned" }), dest)).rejects.toMatchObject({ rule: "Symlink" });
    await expect(extractZip(zipFiles({ "file.txt": "pwned" }), dest)).rejects.toMatchObject({ rule: "Symlink" });
    expect(existsSync(join(outside, "evil.txt"))).toBe(false);
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe("original");
  });

  it("a file entry followed by file/child is a typed error, with nothing written", async () => {
    const dest = join(tmp.dir, "dest-clash");
    const z = zipSync({ a: strToU8("file"), "a/child": strToU8("child"), "b.txt": strToU8("b") });
    await expect(extractZip(z, dest)).rejects.toMatchObject({ rule: "TypeClash" });
    expect(existsSync(dest) ? readdirSync(dest) : []).toEqual([]);
    // The same clash against what is already on disk.
    mkdirSync(dest, { recursive: true });
    writeFileSync(join(dest, "x"), "existing file");
    await expect(extractZip(zipFiles({ "x/y": "1" }), dest)).rejects.toMatchObject({ rule: "TypeClash" });
    mkdirSync(join(dest, "d"));
    await expect(extractZip(zipFiles({ d: "1" }), dest)).rejects.toMatchObject({ rule: "TypeClash" });
    expect(readdirSync(dest).sort()).toEqual(["d", "x"]);
  });

  it("a damaged entry late in the archive leaves no earlier entry written", async () => {
    const dest = join(tmp.dir, "dest-partial");
    const z = zipSync({ "1.txt": strToU8("one"), "2.txt": strToU8("two-two") }, { level: 0 });
    const bad = new Uint8Array(z);
    bad[Buffer.from(z).indexOf("two-two")] ^= 1;
    await expect(extractZip(bad, dest)).rejects.toMatchObject({ rule: "Checksum" });
    expect(existsSync(join(dest, "1.txt"))).toBe(false);
    expect((await extractZip(z, dest)).sort()).toEqual(["1.txt", "2.txt"]);
    expect(readdirSync(dest).sort()).toEqual(["1.txt", "2.txt"]); // no temporary files left
    // Re-extracting over regular files replaces them.
    await extractZip(zipFiles({ "1.txt": "uno" }), dest);
    expect(readFileSync(join(dest, "1.txt"), "utf8")).toBe("uno");
  });

  it("deflate data of a zip entry that does not inflate is Corrupt", () => {
    const z = zipSync({ "h.txt": strToU8("hello hello hello hello") }, { level: 9 });
    const data = 30 + "h.txt".length + new DataView(z.buffer).getUint16(28, true);
    const bad = new Uint8Array(z);
    bad.fill(0xff, data, data + 4);
    expect(rule(() => unzipSafe(bad))).toMatch(/Corrupt|Checksum/);
  });
});
