import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync, gzipSync } from "fflate";
import { afterAll, describe, expect, it } from "vitest";
import {
  decodeGzipMembers,
  encodeGzipMember,
  GuessNumberEnv,
  guessNumberScript,
  readTrajectories,
  runEpisodes,
  ScriptedPolicy,
  scanTrajectories,
  TrajectoryFileError,
  TrajectoryWriter,
} from "../src/index.js";

const dir = mkdtempSync(join(tmpdir(), "kiln-rollout-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const policy = () => new ScriptedPolicy({ id: "bisect", script: guessNumberScript({ exploreRate: 0.3 }) });
const strip = (t: unknown) => JSON.parse(JSON.stringify(t, (k, v) => (k === "timings" ? undefined : v)));

describe("gzip members", () => {
  it("are standard gzip (multi-member) and self-delimiting", () => {
    const a = encodeGzipMember(new TextEncoder().encode("hello\n"));
    const b = encodeGzipMember(new TextEncoder().encode("world\n"));
    const both = new Uint8Array([...a, ...b]);
    const decoded = decodeGzipMembers(both);
    expect(decoded.payloads.map((p) => new TextDecoder().decode(p))).toEqual(["hello\n", "world\n"]);
    expect(decoded.torn).toBe(false);
    // An ordinary gzip reader sees the first member unchanged (extra field skipped).
    expect(new TextDecoder().decode(gunzipSync(a))).toBe("hello\n");
    const cut = decodeGzipMembers(both.subarray(0, both.length - 3));
    expect(cut).toMatchObject({ torn: true, validBytes: a.length });
    expect(cut.payloads).toHaveLength(1);
  });

  it("treats damage before the last member as corruption", () => {
    const a = encodeGzipMember(new TextEncoder().encode("x".repeat(100)));
    const b = encodeGzipMember(new TextEncoder().encode("y"));
    const bad = new Uint8Array([...a, ...b]);
    bad[a.length - 6] ^= 0xff; // CRC of the first member
    expect(() => decodeGzipMembers(bad, "f.gz")).toThrow(
      /f\.gz: episode 1 \(gzip member at byte 0\) is corrupt: CRC-32 mismatch/,
    );
    expect(() => decodeGzipMembers(new Uint8Array([1, 2, 3]), "f.gz")).toThrow(TrajectoryFileError);
  });
});

describe("TrajectoryWriter", () => {
  for (const ext of [".jsonl.gz", ".jsonl"]) {
    it(`appends episodes, repairs a torn tail and resumes (${ext})`, async () => {
      const path = join(dir, "nested", "rollouts", `run${ext}`); // parent folders are created
      const w = await TrajectoryWriter.open(path, { mode: "overwrite" });
      const first = await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: policy(), episodes: 3, sink: w });
      await w.close();
      // Simulate a crash in the middle of the fourth append.
      const extra = readFileSync(path).subarray(0, 25);
      appendFileSync(path, extra);
      const read = await readTrajectories(path);
      expect(read.torn).toBe(true);
      expect(read.trajectories.map(strip)).toEqual(first.trajectories.map(strip));

      const w2 = await TrajectoryWriter.open(path);
      expect(w2.repairedTornTail).toBe(true);
      expect(w2.resumedCount).toBe(3);
      const second = await runEpisodes({
        makeEnv: () => new GuessNumberEnv(),
        policy: policy(),
        episodes: 5,
        sink: w2,
      });
      await w2.close();
      expect(second.skipped).toBe(3);
      expect(second.trajectories.map((t) => t.episodeId)).toEqual(["episode-00003", "episode-00004"]);
      const all = await readTrajectories(path);
      expect(all.torn).toBe(false);
      expect(all.trajectories.map((t) => t.episodeId)).toEqual([0, 1, 2, 3, 4].map((i) => `episode-0000${i}`));
    });
  }

  it("streams files larger than its read buffer, with records larger than it too", async () => {
    const run = await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: policy(), episodes: 30 });
    const big = structuredClone(run.trajectories[0]);
    big.episodeId = "big";
    big.metadata.blob = "x".repeat(1_500_000); // one record beyond the 1 MiB buffer
    for (const ext of [".jsonl", ".jsonl.gz"]) {
      const path = join(dir, `large${ext}`);
      const w = await TrajectoryWriter.open(path, { mode: "overwrite", sync: false });
      for (const t of run.trajectories.slice(0, 15)) await w.append(t);
      await w.append(big);
      for (const t of run.trajectories.slice(15)) await w.append(t);
      await w.close();
      if (ext === ".jsonl") expect(statSync(path).size).toBeGreaterThan(2 * 1024 * 1024);
      const seen: string[] = [];
      const scan = await scanTrajectories(path, (t) => seen.push(t.episodeId));
      expect(scan).toEqual({ count: 31, torn: false, validBytes: statSync(path).size });
      expect(seen).toEqual([
        ...run.trajectories.slice(0, 15).map((t) => t.episodeId),
        "big",
        ...run.trajectories.slice(15).map((t) => t.episodeId),
      ]);
      const back = await readTrajectories(path);
      expect((back.trajectories[15].metadata.blob as string).length).toBe(1_500_000);
    }
  });

  it("reads gzip files written by other tools (plain multi-member gzip)", async () => {
    const run = await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: policy(), episodes: 3 });
    const lines = run.trajectories.map((t) => `${JSON.stringify(t)}\n`);
    const a = gzipSync(new TextEncoder().encode(lines[0] + lines[1]));
    const b = gzipSync(new TextEncoder().encode(lines[2]));
    const path = join(dir, "foreign.jsonl.gz");
    writeFileSync(path, new Uint8Array([...a, ...b]));
    const back = await readTrajectories(path);
    expect(back.trajectories.map((t) => t.episodeId)).toEqual(run.trajectories.map((t) => t.episodeId));
    expect(back.torn).toBe(false);
  });

  it("rejects records of a newer schema version and non-trajectories", async () => {
    const good = (await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: policy(), episodes: 1 }))
      .trajectories[0];
    const path = join(dir, "future.jsonl");
    writeFileSync(path, `${JSON.stringify({ ...good, version: 99 })}\n`);
    await expect(readTrajectories(path)).rejects.toThrow(/schema version 99 is newer than the supported version 1/);
    writeFileSync(path, `${JSON.stringify({ hello: 1 })}\n`);
    await expect(readTrajectories(path)).rejects.toThrow(/not a kiln trajectory/);
  });

  it("loses nothing when the writing process is killed mid-run", async () => {
    const path = join(dir, "killed.jsonl.gz");
    // Node itself runs the script (tsx as a loader), so SIGKILL hits the writing process.
    const script = fileURLToPath(new URL("./fixtures/run-child.ts", import.meta.url));
    const root = fileURLToPath(new URL("../../..", import.meta.url));
    const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", script, path, "40"], {
      cwd: root,
      stdio: "ignore",
    });
    // Kill it once a few episodes are on disk.
    const t0 = Date.now();
    while (Date.now() - t0 < 30_000) {
      await new Promise((r) => setTimeout(r, 50));
      const size = (() => {
        try {
          return statSync(path).size;
        } catch {
          return 0;
        }
      })();
      if (size > 0 && (await readTrajectories(path)).trajectories.length >= 4) break;
    }
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const partial = await readTrajectories(path);
    expect(partial.trajectories.length).toBeGreaterThanOrEqual(4);
    expect(partial.trajectories.length).toBeLessThan(40);

    const w = await TrajectoryWriter.open(path);
    const resumed = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: policy(),
      episodes: 40,
      baseSeed: 42,
      concurrency: 4,
      sink: w,
    });
    await w.close();
    expect(resumed.skipped).toBe(w.resumedCount);
    const final = await readTrajectories(path);
    const ids = final.trajectories.map((t) => t.episodeId);
    expect(new Set(ids).size).toBe(40);
    expect(ids).toHaveLength(40);
    // Every episode equals the one an uninterrupted run produces.
    const clean = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: policy(),
      episodes: 40,
      baseSeed: 42,
    });
    const byId = new Map(final.trajectories.map((t) => [t.episodeId, strip(t)]));
    for (const t of clean.trajectories) expect(byId.get(t.episodeId)).toEqual(strip(t));
  });
});
