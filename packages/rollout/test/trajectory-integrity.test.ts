// Regression tests for resume on damaged files: a torn tail is cut, every other kind of damage
// stops with a typed error naming the byte offset and episode, and nothing is deleted.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateRawSync } from "node:zlib";
import { gzipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  decodeGzipMembers,
  GuessNumberEnv,
  guessNumberScript,
  gunzipMembers,
  readTrajectories,
  repairTrajectoryFile,
  runEpisodes,
  ScriptedPolicy,
  sizedMemberLength,
  type Trajectory,
  TrajectoryFileError,
  TrajectoryWriter,
  writeJsonlFile,
} from "../src/index.js";

/** A real garbage collection, so the memory baseline holds live objects only. */
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;
const dir = mkdtempSync(join(tmpdir(), "kiln-rollout-integrity-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const policy = () => new ScriptedPolicy({ id: "bisect", script: guessNumberScript({ exploreRate: 0.3 }) });
let episodes: Trajectory[] = [];
let clean = new Uint8Array(0);
/** Byte offset of each gzip member (one per episode) in `clean`. */
let starts: number[] = [];

beforeAll(async () => {
  episodes = (await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: policy(), episodes: 20, baseSeed: 7 }))
    .trajectories;
  const path = join(dir, "clean.jsonl.gz");
  const w = await TrajectoryWriter.open(path, { mode: "overwrite", sync: false });
  for (const t of episodes) await w.append(t);
  await w.close();
  clean = new Uint8Array(readFileSync(path));
  starts = [];
  for (let o = 0; o < clean.length; o += sizedMemberLength(clean.subarray(o))!) starts.push(o);
  expect(starts).toHaveLength(20);
});

let n = 0;
/** A copy of the clean file, changed in place by `mutate` or replaced by what it returns. */
function damaged(mutate: (b: Uint8Array) => unknown): string {
  const bytes = new Uint8Array(clean);
  const out = (mutate(bytes) as Uint8Array | undefined) ?? bytes;
  const path = join(dir, `damaged-${n++}.jsonl.gz`);
  writeFileSync(path, out);
  return path;
}

async function expectRefusal(path: string, offset: number, episode: number, problem = "corrupt") {
  const before = readFileSync(path);
  const err = await TrajectoryWriter.open(path).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TrajectoryFileError);
  const e = err as TrajectoryFileError;
  expect(e.problem).toBe(problem);
  expect(e.byteOffset).toBe(offset);
  expect(e.episode).toBe(episode);
  expect(e.message).toContain(`byte ${offset}`);
  // Nothing was cut: the file is byte for byte what it was.
  expect(readFileSync(path).equals(before)).toBe(true);
}

describe("resume never deletes intact episodes", () => {
  it("a flipped byte inside member 6 of 20 is corruption, not a torn tail", async () => {
    const path = damaged((b) => {
      b[starts[5] + 40] ^= 0x01;
    });
    await expectRefusal(path, starts[5], 6);
    await expect(readTrajectories(path)).rejects.toThrow(/episode 6 \(gzip member at byte \d+\) is corrupt/);
  });

  it("a flipped CRC, a bad size field (larger and smaller) and zeroed bytes are corruption", async () => {
    const crc = damaged((b) => {
      b[starts[6] - 7] ^= 0x80; // CRC-32 of member 6 (it ends where member 7 starts)
    });
    await expectRefusal(crc, starts[5], 6);
    const bigger = damaged((b) => {
      b[starts[5] + 18] ^= 0x01; // bit 16 of member 6's size: now runs past the end of the file
    });
    await expectRefusal(bigger, starts[5], 6);
    const smaller = damaged((b) => {
      b[starts[5] + 16] ^= 0x04;
    });
    await expectRefusal(smaller, starts[5], 6);
    const zeroed = damaged((b) => {
      b.fill(0, starts[5] + 30, starts[5] + 60);
    });
    await expectRefusal(zeroed, starts[5], 6);
    // Damage to the last member that is not a prefix of it is corruption as well.
    const last = damaged((b) => {
      b[starts[19] + 30] ^= 0x10;
    });
    await expectRefusal(last, starts[19], 20);
  });

  it("a torn tail (a prefix of the last member) is still cut", async () => {
    for (const keep of [3, 19, 25, starts[19] - starts[18] - 4]) {
      const path = damaged((b) => b.subarray(0, starts[19] + Math.min(keep, clean.length - starts[19] - 1)));
      const w = await TrajectoryWriter.open(path, { sync: false });
      expect(w.repairedTornTail).toBe(true);
      expect(w.resumedCount).toBe(19);
      expect(readFileSync(path).length).toBe(starts[19]);
    }
  });

  it("appended garbage is reported at its real offset", async () => {
    const path = damaged((b) => new Uint8Array([...b, ...new TextEncoder().encode("not gzip at all")]));
    await expectRefusal(path, clean.length, 21, "garbage");
    const short = damaged((b) => new Uint8Array([...b, 0x41]));
    await expectRefusal(short, clean.length, 21, "garbage");
  });

  it("an explicit repair moves the damaged file aside and keeps every intact episode", async () => {
    const path = damaged((b) => {
      b[starts[5] + 40] ^= 0x01;
      b[starts[11] + 17] ^= 0x40; // and member 12's size field
    });
    const original = readFileSync(path);
    const w = await TrajectoryWriter.open(path, { onCorrupt: "move-aside", sync: false });
    expect(w.repair).not.toBeNull();
    expect(readFileSync(w.repair!.movedTo).equals(original)).toBe(true);
    const expected = episodes.map((t) => t.episodeId).filter((_, i) => i !== 5 && i !== 11);
    expect(w.repair!.keptIds).toEqual(expected);
    expect(w.repair!.dropped.map((d) => d.byteOffset)).toEqual([starts[5], starts[11]]);
    expect(w.resumedCount).toBe(18);
    expect((await readTrajectories(path)).trajectories.map((t) => t.episodeId)).toEqual(expected);
    await w.close();
  });

  it("plain JSONL: a bad line in the middle stops with its offset; garbage at the end is not cut", async () => {
    const lines = episodes.slice(0, 4).map((t) => `${JSON.stringify(t)}\n`);
    const path = join(dir, "plain.jsonl");
    writeFileSync(path, lines[0] + lines[1].replace('"episodeId"', '"episodeId" oops') + lines[2]);
    await expect(TrajectoryWriter.open(path)).rejects.toMatchObject({
      problem: "garbage",
      byteOffset: Buffer.byteLength(lines[0]),
      episode: 2,
    });
    writeFileSync(path, `${lines[0]}garbage`);
    await expect(TrajectoryWriter.open(path)).rejects.toMatchObject({
      problem: "garbage",
      byteOffset: Buffer.byteLength(lines[0]),
    });
    expect(readFileSync(path, "utf8")).toBe(`${lines[0]}garbage`);
    // A complete record missing only its newline is kept, and the next append starts a new line.
    writeFileSync(path, lines[0] + lines[1].slice(0, -1));
    const w = await TrajectoryWriter.open(path, { sync: false });
    expect(w.resumedCount).toBe(2);
    await w.append(episodes[2]);
    await w.close();
    expect((await readTrajectories(path)).trajectories).toHaveLength(3);
  });
});

/** A sized member holding `mib` MiB of zeros (deflated by zlib from calloc'ed, never-written pages). */
function bombMember(mib: number): Uint8Array {
  const body = new Uint8Array(deflateRawSync(Buffer.alloc(mib * 1024 * 1024)));
  const size = 20 + body.length + 8;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out.set([0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 255, 8, 0, 0x4b, 0x4c, 4, 0]);
  view.setUint32(16, size, true);
  out.set(body, 20);
  return out; // trailer left zero: the cap must trip before it is ever checked
}

describe("caps bound memory", () => {
  it("readTrajectories stops a gzip bomb with a typed error, before inflating it", async () => {
    const path = join(dir, "bomb.jsonl.gz");
    writeFileSync(path, bombMember(48));
    collectGarbage();
    const before = process.memoryUsage().arrayBuffers;
    const err = await readTrajectories(path, { maxRecordBytes: 2 * 1024 * 1024 }).catch((e: unknown) => e);
    const grown = process.memoryUsage().arrayBuffers - before;
    expect(err).toBeInstanceOf(TrajectoryFileError);
    expect(err).toMatchObject({ problem: "too-large", byteOffset: 0, episode: 1 });
    expect(grown).toBeLessThan(24 * 1024 * 1024);
    // A total cap applies across episodes as well.
    await expect(readTrajectories(path, { maxTotalBytes: 1 << 20 })).rejects.toMatchObject({ problem: "too-large" });
  });

  it("foreign gzip: CRC-32 and ISIZE are verified; a missing trailer or trailing bytes are errors", () => {
    const text = new TextEncoder().encode(`${JSON.stringify({ episodeId: "ep-00042" })}\n`);
    const gz = gzipSync(text);
    expect(new TextDecoder().decode(gunzipMembers(gz)[0])).toContain("ep-00042");
    const flipped = new Uint8Array(gz);
    flipped[gz.length - 9] ^= 0x01; // last deflate byte: inflates, but to different text
    expect(() => gunzipMembers(flipped)).toThrow(TrajectoryFileError);
    const crc = new Uint8Array(gz);
    crc[gz.length - 8] ^= 0x01;
    expect(() => gunzipMembers(crc)).toThrow(/CRC-32\/ISIZE mismatch/);
    expect(() => gunzipMembers(gz.subarray(0, gz.length - 8))).toThrow(TrajectoryFileError);
    expect(() => gunzipMembers(new Uint8Array([...gz, 1, 2]))).toThrow(TrajectoryFileError);
    expect(() => gunzipMembers(new Uint8Array([...gz, 1, 2, 3, 4, 5, 6]))).toThrow(TrajectoryFileError);
    expect(() => decodeGzipMembers(new Uint8Array([...gz, 0x1f, 0x8b, 8, 0]))).toThrow(TrajectoryFileError);
  });
});

describe("durability", () => {
  it("same-seed runs write byte-identical files with timings in a sidecar", async () => {
    const hashes: string[] = [];
    for (const run of [0, 1]) {
      const path = join(dir, `seeded-${run}.jsonl.gz`);
      const w = await TrajectoryWriter.open(path, { mode: "overwrite", timings: "sidecar" });
      await runEpisodes({
        makeEnv: () => new GuessNumberEnv(),
        policy: policy(),
        episodes: 5,
        baseSeed: 3,
        concurrency: 1,
        sink: w,
      });
      await w.close();
      hashes.push(createHash("sha256").update(readFileSync(path)).digest("hex"));
      expect(existsSync(`${path}.timings.jsonl`)).toBe(true);
      expect(readFileSync(`${path}.timings.jsonl`, "utf8").trim().split("\n")).toHaveLength(5);
    }
    expect(hashes[0]).toBe(hashes[1]);
  });

  it("writeJsonlFile and a new trajectory file fsync their directory", async () => {
    const probe = await open(join(dir, "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { sync(): Promise<void> };
    await probe.close();
    let syncs = 0;
    const spy = vi.spyOn(proto, "sync").mockImplementation(async () => {
      syncs++;
    });
    try {
      await writeJsonlFile(join(dir, "rows.jsonl"), [{ a: 1 }]);
      expect(syncs).toBeGreaterThanOrEqual(1);
      syncs = 0;
      const w = await TrajectoryWriter.open(join(dir, "fresh", "t.jsonl.gz"), { mode: "overwrite" });
      await w.append(episodes[0]);
      await w.close();
      expect(syncs).toBe(2); // the appended episode, then the directory that gained the file
    } finally {
      spy.mockRestore();
    }
  });

  it("repairTrajectoryFile on an intact file keeps everything", async () => {
    const path = join(dir, "intact.jsonl.gz");
    writeFileSync(path, clean);
    const r = await repairTrajectoryFile(path);
    expect(r.keptIds).toHaveLength(20);
    expect(r.dropped).toEqual([]);
    expect(readFileSync(path).equals(Buffer.from(clean))).toBe(true);
  });
});
