// Regression tests for the archive failures of the misuse probe (shared-data zip bomb, links and
// FIFOs written as files, a bare ENAMETOOLONG, gzip trailing bytes reported at offset 0). Every
// malicious archive is built here, byte by byte.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { deflateSync, strToU8 } from "fflate";
import { afterAll, describe, expect, it } from "vitest";
import { ArchiveError, crc32, extractZip, gunzip, gzip, readGzipMembers, unzipSafe } from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);

interface CraftEntry {
  name: string;
  data?: Uint8Array;
  /** Reuse the local header and data of entry `shareWith` (the overlap bomb). */
  shareWith?: number;
  madeBy?: number;
  externalAttributes?: number;
  centralExtra?: Uint8Array;
}

/** A zip with deflated entries; central entries may point at another entry's local header. */
function craftZip(entries: CraftEntry[]): Uint8Array {
  const parts: Uint8Array[] = [];
  let offset = 0;
  const local: { offset: number; crc: number; csize: number; size: number }[] = [];
  for (const e of entries) {
    if (e.shareWith !== undefined) {
      local.push(local[e.shareWith]);
      continue;
    }
    const data = e.data ?? new Uint8Array(0);
    const body = deflateSync(data, { level: 9 });
    const name = strToU8(e.name);
    const h = new Uint8Array(30 + name.length);
    const v = new DataView(h.buffer);
    v.setUint32(0, 0x04034b50, true);
    v.setUint16(4, 20, true);
    v.setUint16(8, 8, true); // deflate
    v.setUint32(14, crc32(data), true);
    v.setUint32(18, body.length, true);
    v.setUint32(22, data.length, true);
    v.setUint16(26, name.length, true);
    h.set(name, 30);
    local.push({ offset, crc: crc32(data), csize: body.length, size: data.length });
    parts.push(h, body);
    offset += h.length + body.length;
  }
  const cdStart = offset;
  entries.forEach((e, i) => {
    const name = strToU8(e.name);
    const extra = e.centralExtra ?? new Uint8Array(0);
    const c = new Uint8Array(46 + name.length + extra.length);
    const v = new DataView(c.buffer);
    v.setUint32(0, 0x02014b50, true);
    v.setUint16(4, ((e.madeBy ?? 0) << 8) | 20, true);
    v.setUint16(6, 20, true);
    v.setUint16(10, 8, true);
    v.setUint32(16, local[i].crc, true);
    v.setUint32(20, local[i].csize, true);
    v.setUint32(24, local[i].size, true);
    v.setUint16(28, name.length, true);
    v.setUint16(30, extra.length, true);
    v.setUint32(38, e.externalAttributes ?? 0, true);
    v.setUint32(42, local[i].offset, true);
    c.set(name, 46);
    c.set(extra, 46 + name.length);
    parts.push(c);
    offset += c.length;
  });
  const end = new Uint8Array(22);
  const ev = new DataView(end.buffer);
  ev.setUint32(0, 0x06054b50, true);
  ev.setUint16(8, entries.length, true);
  ev.setUint16(10, entries.length, true);
  ev.setUint32(12, offset - cdStart, true);
  ev.setUint32(16, cdStart, true);
  parts.push(end);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function thrown(fn: () => unknown): ArchiveError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ArchiveError) return e;
    throw e;
  }
  throw new Error("expected an ArchiveError, nothing was thrown");
}

const unixMode = (mode: number) => (mode << 16) >>> 0;

describe("zip entries that share compressed data are refused (the overlap bomb)", () => {
  it("100 entries pointing at one 16 MiB stream: Overlap, found before anything is inflated", () => {
    const entries: CraftEntry[] = [{ name: "e0.bin", data: new Uint8Array(16 << 20) }];
    for (let i = 1; i < 100; i++) entries.push({ name: `e${i}.bin`, shareWith: 0 });
    const bomb = craftZip(entries);
    expect(bomb.length).toBeLessThan(40_000); // 1.6 GB declared, under the 4 GiB default cap
    const t0 = performance.now();
    const e = thrown(() => unzipSafe(bomb));
    expect(e.rule).toBe("Overlap");
    expect(e.message).toMatch(/overlaps the bytes of entry "e\d+\.bin"/);
    expect(performance.now() - t0).toBeLessThan(500); // inflating every entry takes seconds
  });

  it("an entry whose data runs into the central directory is refused", () => {
    const z = craftZip([{ name: "a.txt", data: strToU8("hello hello hello") }]);
    const v = new DataView(z.buffer);
    const cd = v.getUint32(z.length - 6, true);
    v.setUint32(cd + 20, v.getUint32(cd + 20, true) + 10, true); // compressed size +10
    expect(thrown(() => unzipSafe(z)).rule).toBe("Overlap");
  });

  it("a local header placed inside another entry's data (the overlapped-header bomb) is refused", () => {
    const z = craftZip([
      { name: "a.txt", data: strToU8("aaaa") },
      { name: "b.txt", data: strToU8("bbbb") },
    ]);
    const v = new DataView(z.buffer);
    const cd = v.getUint32(z.length - 6, true);
    // Grow a.txt's compressed size by one byte so that its data covers b.txt's local header.
    const bOffset = v.getUint32(cd + 46 + 5 + 42, true);
    v.setUint32(cd + 20, bOffset - 35 + 1, true);
    const e = thrown(() => unzipSafe(z));
    expect([e.rule, e.entry, e.byteOffset]).toEqual(["Overlap", "b.txt", bOffset]);
  });

  it("honest archives still extract", () => {
    const z = craftZip([
      { name: "a.txt", data: strToU8("aaaa") },
      { name: "d/", madeBy: 3, externalAttributes: unixMode(0o040755) },
      { name: "d/b.txt", data: strToU8("bbbb"), madeBy: 3, externalAttributes: unixMode(0o100644) },
    ]);
    expect([...unzipSafe(z).keys()]).toEqual(["a.txt", "d/b.txt"]);
  });
});

describe("non-regular zip entries are refused by name", () => {
  const cases: [string, CraftEntry, string][] = [
    [
      "symlink",
      { name: "link", data: strToU8("/etc/passwd"), madeBy: 3, externalAttributes: unixMode(0o120777) },
      "symlink",
    ],
    ["FIFO", { name: "fifo", madeBy: 3, externalAttributes: unixMode(0o010644) }, "FIFO"],
    ["character device", { name: "tty", madeBy: 3, externalAttributes: unixMode(0o020666) }, "device"],
    ["block device", { name: "sda", madeBy: 19, externalAttributes: unixMode(0o060660) }, "device"],
    ["socket", { name: "sock", madeBy: 3, externalAttributes: unixMode(0o140755) }, "socket"],
    [
      "hard link (PKWARE Unix extra field with a link target)",
      {
        name: "hard",
        madeBy: 3,
        externalAttributes: unixMode(0o100644),
        centralExtra: new Uint8Array([0x0d, 0, 12 + 6, 0, ...new Uint8Array(12), ...strToU8("a.txt\0")]),
      },
      "hardlink",
    ],
    ["Windows reparse point", { name: "junction", madeBy: 10, externalAttributes: 0x400 }, "symlink"],
  ];
  for (const [what, entry, kind] of cases) {
    it(`${what}: NotRegularFile, and extraction writes nothing`, async () => {
      const z = craftZip([{ name: "a.txt", data: strToU8("fine") }, entry]);
      const e = thrown(() => unzipSafe(z));
      expect(e.rule).toBe("NotRegularFile");
      expect(e.entry).toBe(entry.name);
      expect(e.message).toContain(`is a ${kind}`);
      const dest = join(tmp.dir, `nonregular-${kind}-${entry.name}`);
      await expect(extractZip(z, dest)).rejects.toMatchObject({ rule: "NotRegularFile" });
      expect(existsSync(dest) ? readdirSync(dest) : []).toEqual([]);
    });
  }
});

describe("over-long entry names are a typed error, not a bare ENAMETOOLONG", () => {
  it("a 5,000-character name", async () => {
    const name = "n".repeat(5000);
    const z = craftZip([{ name, data: strToU8("x") }]);
    const e = thrown(() => unzipSafe(z));
    expect(e.rule).toBe("NameTooLong");
    expect(e.entry).toBe(name);
    expect(e.message.length).toBeLessThan(400); // the name is shortened in the message
    await expect(extractZip(z, join(tmp.dir, "long"))).rejects.toMatchObject({ rule: "NameTooLong" });
  });

  it("a 256-byte component and a path past 4095 bytes; 255 bytes is fine", () => {
    expect(thrown(() => unzipSafe(craftZip([{ name: `d/${"é".repeat(128)}`, data: strToU8("x") }]))).rule).toBe(
      "NameTooLong",
    );
    const deep = Array.from({ length: 20 }, () => "d".repeat(250)).join("/");
    expect(thrown(() => unzipSafe(craftZip([{ name: deep, data: strToU8("x") }]))).message).toMatch(/PATH_MAX/);
    expect(unzipSafe(craftZip([{ name: "n".repeat(255), data: strToU8("x") }])).size).toBe(1);
  });
});

describe("gzip trailing data is named and placed", () => {
  const gz = gzip(strToU8('{"episode":"ep-00042"}\n'));
  for (const tail of [[0x21], [1, 2, 3], strToU8("garbage after the stream"), new Uint8Array(512)]) {
    it(`${tail.length} trailing bytes: TrailingData at byte ${gz.length}`, () => {
      const e = thrown(() => gunzip(new Uint8Array([...gz, ...tail])));
      expect(e.rule).toBe("TrailingData");
      expect(e.byteOffset).toBe(gz.length);
      expect(e.message).toContain(`ends at byte ${gz.length}`);
    });
  }

  it("after the second of two members, at the end of the second", () => {
    const two = new Uint8Array([...gz, ...gz, 0x42, 0x42]);
    const e = thrown(() => gunzip(two));
    expect([e.rule, e.byteOffset]).toEqual(["TrailingData", 2 * gz.length]);
    // Offsets in errors count from the caller's file when the data is a slice of it.
    expect(thrown(() => readGzipMembers(two, 1 << 20, 1000)).byteOffset).toBe(1000 + 2 * gz.length);
  });

  it("a truncated second member is Corrupt at that member, not trailing data", () => {
    const e = thrown(() => gunzip(new Uint8Array([...gz, ...gz.subarray(0, 12)])));
    expect([e.rule, e.byteOffset]).toEqual(["Corrupt", gz.length]);
  });

  it("members are walked exactly: each one's [start, end)", () => {
    const b = gzip(strToU8("second"));
    const members = readGzipMembers(new Uint8Array([...gz, ...b]));
    expect(members.map((m) => [m.start, m.end])).toEqual([
      [0, gz.length],
      [gz.length, gz.length + b.length],
    ]);
  });
});
