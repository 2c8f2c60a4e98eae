import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { strToU8, zipSync } from "fflate";
import { afterAll, describe, expect, it } from "vitest";
import {
  ArchiveError,
  decodeJsonlGz,
  encodeJsonlGz,
  extractZip,
  gunzip,
  gzip,
  readJsonlGz,
  safeEntryPath,
  unzipSafe,
  writeJsonlGz,
  zipFiles,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);

describe("archives", () => {
  it("gzip round-trips and refuses inflating past a limit", () => {
    const data = new Uint8Array(100_000).fill(65);
    const gz = gzip(data);
    expect(gz.byteLength).toBeLessThan(1000);
    expect(Buffer.from(gunzip(gz)).equals(data)).toBe(true);
    expect(() => gunzip(gz, 50_000)).toThrow(/beyond 50000 bytes/);
    expect(() => gunzip(new Uint8Array([1, 2, 3, 4]))).toThrow(ArchiveError);
  });

  it("JSONL.gz trajectory files round-trip", async () => {
    const recs = [
      { turn: 1, text: "héllo" },
      { turn: 2, reward: -0.5 },
    ];
    expect(decodeJsonlGz(encodeJsonlGz(recs))).toEqual(recs);
    const p = join(tmp.dir, "rollouts/ep.jsonl.gz");
    await writeJsonlGz(p, recs);
    expect(await readJsonlGz(p)).toEqual(recs);
    expect(() => decodeJsonlGz(gzip(strToU8('{"a":1}\n{oops\n')))).toThrow(/line 2/);
  });

  it("zip round-trips and extracts into a directory", async () => {
    const z = zipFiles({ "a.txt": "A", "dir/b.bin": new Uint8Array([1, 2]) });
    const files = unzipSafe(z);
    expect([...files.keys()].sort()).toEqual(["a.txt", "dir/b.bin"]);
    const dest = join(tmp.dir, "x");
    expect((await extractZip(z, dest)).sort()).toEqual(["a.txt", "dir/b.bin"]);
    expect(readFileSync(join(dest, "dir/b.bin"))).toEqual(Buffer.from([1, 2]));
  });

  it("refuses zip-slip: '..', absolute paths, drive letters, backslash tricks", async () => {
    for (const name of ["../evil.txt", "a/../../evil.txt", "/etc/passwd", "C:/x.txt", "..\\evil.txt", "C:\\x"]) {
      const z = zipSync({ [name]: strToU8("pwned") });
      expect(() => unzipSafe(z)).toThrow(ArchiveError);
      await expect(extractZip(z, join(tmp.dir, "slip"))).rejects.toThrow(/refused/);
    }
    expect(existsSync(join(tmp.dir, "evil.txt"))).toBe(false);
    expect(existsSync(join(tmp.dir, "slip"))).toBe(false);
    expect(safeEntryPath("./a//b/./c")).toBe("a/b/c");
    expect(() => zipFiles({ "../x": "y" })).toThrow(ArchiveError);
  });
});
