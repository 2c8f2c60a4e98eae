// Trajectory files: JSONL, gzip-compressed when the name ends in ".gz", appended one episode at a
// time (one sized gzip member per episode, see gzip-members.ts) and synced, so a crash loses at
// most the episode in flight. Reopening with mode "resume" cuts a torn tail and reports which
// episodes are finished, so a rerun skips them. Node only (node:fs).

import { appendFile, mkdir, open, readFile, rename, rm, stat, truncate } from "node:fs/promises";
import { dirname } from "node:path";
import { openAtomic, syncDirectory } from "@kiln/hub-io";
import { strFromU8, strToU8 } from "fflate";
import { TrajectoryFileError } from "./errors.js";
import {
  DEFAULT_MAX_MEMBER_BYTES,
  GZIP_MEMBER_HEADER_BYTES,
  gunzipMembers,
  nextMemberStart,
  readSizedMember,
  sizedMemberLength,
} from "./gzip-members.js";
import { encodeJsonl, isGzipPath } from "./jsonl.js";
import { TRAJECTORY_SCHEMA_VERSION, type Trajectory, trajectorySchema } from "./trajectory.js";

export interface ReadTrajectoriesResult {
  trajectories: Trajectory[];
  /** Whether the file ended in an incomplete episode (cut off by a crash). */
  torn: boolean;
  /** Bytes of complete episodes. */
  validBytes: number;
}

/** Validates one decoded record as a trajectory this version can read. */
export function checkTrajectoryRecord(record: unknown, where: string): Trajectory {
  const r = record as { schema?: unknown; version?: unknown };
  if (typeof r?.version === "number" && r.version > TRAJECTORY_SCHEMA_VERSION) {
    throw new TrajectoryFileError(
      `${where}: trajectory schema version ${r.version} is newer than the supported version ${TRAJECTORY_SCHEMA_VERSION}`,
      "schema",
    );
  }
  const parsed = trajectorySchema.safeParse(record);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TrajectoryFileError(
      `${where}: not a kiln trajectory: ${issue.path.join(".") || "(root)"}: ${issue.message}`,
      "schema",
    );
  }
  return record as Trajectory;
}

export interface ScanResult {
  /** Complete episodes seen. */
  count: number;
  torn: boolean;
  validBytes: number;
}

export interface TrajectoryReadLimits {
  /** Largest inflated episode (gzip member) or JSONL line accepted (default 256 MiB). */
  maxRecordBytes?: number;
  /** Largest total of inflated bytes (default: unbounded for scans, 1 GiB for readTrajectories). */
  maxTotalBytes?: number;
}

const CHUNK = 1 << 20;
const DEFAULT_READ_TOTAL = 1024 * 1024 * 1024;

/**
 * Streams a trajectory file episode by episode (memory: one episode plus a 1 MiB buffer), so
 * resuming a run of any size needs no more than its ids. A torn last episode (a strict prefix of
 * a record, what a crash mid-append leaves) is reported, not passed on. Any other damage throws a
 * TrajectoryFileError with the byte offset and episode number: nothing is guessed away.
 */
export async function scanTrajectories(
  path: string,
  onTrajectory: (t: Trajectory) => void,
  limits: TrajectoryReadLimits = {},
): Promise<ScanResult> {
  const maxRecord = limits.maxRecordBytes ?? DEFAULT_MAX_MEMBER_BYTES;
  const maxTotal = limits.maxTotalBytes ?? Number.POSITIVE_INFINITY;
  const handle = await open(path, "r");
  try {
    const size = (await handle.stat()).size;
    let buf: Uint8Array = new Uint8Array(0);
    let bufStart = 0; // file offset of buf[0]
    let fileAt = 0; // next byte to read
    let count = 0;
    let inflated = 0;
    // Makes buf hold [offset, offset + n) when the file has it; returns whether it does.
    const ensure = async (offset: number, n: number): Promise<boolean> => {
      if (offset >= bufStart && offset - bufStart + n <= buf.length) return true;
      if (offset + n > size) return false;
      const keep =
        offset >= bufStart && offset - bufStart < buf.length ? buf.subarray(offset - bufStart) : buf.subarray(0, 0);
      if (keep.length === 0) fileAt = offset;
      const want = Math.max(n - keep.length, CHUNK);
      const next = new Uint8Array(keep.length + Math.min(want, size - fileAt));
      next.set(keep);
      let filled = keep.length;
      while (filled < next.length) {
        const { bytesRead } = await handle.read(next, filled, next.length - filled, fileAt);
        if (bytesRead === 0) break;
        filled += bytesRead;
        fileAt += bytesRead;
      }
      buf = next.subarray(0, filled);
      bufStart = offset;
      return offset - bufStart + n <= buf.length;
    };
    const window = (offset: number, n: number) => buf.subarray(offset - bufStart, offset - bufStart + n);
    const countInflated = (bytes: number, offset: number) => {
      inflated += bytes;
      if (inflated > maxTotal)
        throw new TrajectoryFileError(
          `${path}: more than ${maxTotal} bytes of records (cap maxTotalBytes), reached at byte ${offset}`,
          "too-large",
          offset,
          count + 1,
        );
    };
    const emitText = (text: string, offset: number) => {
      for (const line of text.split("\n")) {
        if (line.trim() === "") continue;
        let record: unknown;
        try {
          record = JSON.parse(line);
        } catch (err) {
          throw new TrajectoryFileError(
            `${path}: episode ${count + 1} (at byte ${offset}) is not valid JSON: ${(err as Error).message}`,
            "garbage",
            offset,
            count + 1,
          );
        }
        count++;
        onTrajectory(checkTrajectoryRecord(record, `${path}: record ${count} (at byte ${offset})`));
      }
    };
    let offset = 0;
    if (isGzipPath(path)) {
      while (offset < size) {
        const remaining = size - offset;
        const at = { name: path, offset, episode: count + 1 };
        await ensure(offset, Math.min(GZIP_MEMBER_HEADER_BYTES, remaining));
        const head = window(offset, Math.min(GZIP_MEMBER_HEADER_BYTES, remaining));
        if (head[0] !== 0x1f || (head.length > 1 && head[1] !== 0x8b)) {
          throw new TrajectoryFileError(
            `${path}: byte ${offset} does not start a gzip member (magic 1f 8b): ${remaining} bytes of garbage after episode ${count}`,
            "garbage",
            offset,
            count + 1,
          );
        }
        const memberSize = head.length === GZIP_MEMBER_HEADER_BYTES ? sizedMemberLength(head) : -1;
        if (memberSize === null) {
          // Not written by TrajectoryWriter (e.g. recompressed by another tool): decode the rest at once.
          const rest = new Uint8Array(remaining);
          await handle.read(rest, 0, rest.length, offset);
          const budget = Math.min(maxTotal - inflated, Math.max(maxRecord, DEFAULT_READ_TOTAL));
          for (const payload of gunzipMembers(rest, { name: path, baseOffset: offset, maxBytes: budget })) {
            countInflated(payload.length, offset);
            emitText(strFromU8(payload), offset);
          }
          return { count, torn: false, validBytes: size };
        }
        const want = memberSize < 0 ? remaining : Math.min(memberSize, remaining);
        if (want > maxRecord + (maxRecord >>> 6) + 65_536) {
          // A torn or valid member cannot be this large compressed: the size field is wrong.
          throw new TrajectoryFileError(
            `${path}: episode ${count + 1} (gzip member at byte ${offset}) is corrupt or too large: size field ${memberSize} exceeds the cap of ${maxRecord} bytes`,
            memberSize > remaining ? "corrupt" : "too-large",
            offset,
            count + 1,
          );
        }
        await ensure(offset, want);
        const read = readSizedMember(window(offset, want), at, Math.min(maxRecord, maxTotal - inflated));
        if (read.kind === "torn") return { count, torn: true, validBytes: offset };
        countInflated(read.payload.length, offset);
        emitText(strFromU8(read.payload), offset);
        offset += read.length;
      }
      return { count, torn: false, validBytes: offset };
    }
    // Plain JSONL: line by line.
    const decoder = new TextDecoder();
    while (offset < size) {
      await ensure(offset, Math.min(CHUNK, size - offset));
      const view = buf.subarray(offset - bufStart);
      const nl = view.indexOf(0x0a);
      if (nl < 0) {
        if (view.length > maxRecord)
          throw new TrajectoryFileError(
            `${path}: line at byte ${offset} is longer than the cap of ${maxRecord} bytes`,
            "too-large",
            offset,
            count + 1,
          );
        if (offset - bufStart + view.length >= size - bufStart) {
          // The last line has no newline: a torn record is a prefix of `{...}`, not something else.
          const text = decoder.decode(view);
          const parsed = (() => {
            try {
              return { ok: true as const, value: JSON.parse(text) as unknown };
            } catch {
              return { ok: false as const };
            }
          })();
          if (parsed.ok) {
            // A complete record whose newline was not written: keep it.
            count++;
            onTrajectory(checkTrajectoryRecord(parsed.value, `${path}: record ${count} (at byte ${offset})`));
            return { count, torn: false, validBytes: size };
          }
          if (!text.trimStart().startsWith("{"))
            throw new TrajectoryFileError(
              `${path}: byte ${offset}: ${view.length} bytes after episode ${count} are not a record`,
              "garbage",
              offset,
              count + 1,
            );
          return { count, torn: true, validBytes: offset };
        }
        await ensure(offset, view.length + 1); // a line longer than the buffer: grow it
        continue;
      }
      if (nl > maxRecord)
        throw new TrajectoryFileError(
          `${path}: line at byte ${offset} is longer than the cap of ${maxRecord} bytes`,
          "too-large",
          offset,
          count + 1,
        );
      const line = decoder.decode(view.subarray(0, nl));
      countInflated(nl + 1, offset);
      emitText(line, offset);
      offset += nl + 1;
    }
    return { count, torn: false, validBytes: offset };
  } finally {
    await handle.close();
  }
}

/**
 * Reads every complete trajectory of a file; a torn last episode is skipped and reported.
 * Inflated bytes are capped (default 256 MiB per episode, 1 GiB in all) so a hostile file
 * stops with a TrajectoryFileError ("too-large") instead of exhausting memory.
 */
export async function readTrajectories(
  path: string,
  limits: TrajectoryReadLimits = {},
): Promise<ReadTrajectoriesResult> {
  const trajectories: Trajectory[] = [];
  const { torn, validBytes } = await scanTrajectories(path, (t) => trajectories.push(t), {
    maxTotalBytes: DEFAULT_READ_TOTAL,
    ...limits,
  });
  return { trajectories, torn, validBytes };
}

export interface TrajectoryRepairReport {
  /** Where the damaged file now lives (it is never modified or deleted). */
  movedTo: string;
  /** Episodes kept in the repaired file, in order. */
  keptIds: string[];
  /** Byte ranges of the damaged file that were left out, with the reason. */
  dropped: { byteOffset: number; bytes: number; reason: string }[];
}

/**
 * Explicit repair of a damaged trajectory file: renames it to `<path>.damaged-<time>` (kept as
 * is), then writes a new `<path>` (temp file, fsync, rename) holding every intact episode in
 * order. Gzip members that fail their checks are skipped up to the next intact member header.
 */
export async function repairTrajectoryFile(
  path: string,
  limits: TrajectoryReadLimits = {},
): Promise<TrajectoryRepairReport> {
  const maxRecord = limits.maxRecordBytes ?? DEFAULT_MAX_MEMBER_BYTES;
  const movedTo = `${path}.damaged-${new Date().toISOString().replace(/[:.]/g, "-")}`;
  await rename(path, movedTo);
  await syncDirectory(dirname(path));
  const data = new Uint8Array(await readFile(movedTo));
  const keptIds: string[] = [];
  const keptBytes: Uint8Array[] = [];
  const dropped: TrajectoryRepairReport["dropped"] = [];
  const records = (text: string): Trajectory[] | null => {
    try {
      return text
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => checkTrajectoryRecord(JSON.parse(l), path));
    } catch {
      return null;
    }
  };
  if (isGzipPath(path)) {
    let offset = 0;
    while (offset < data.length) {
      let reason: string;
      try {
        const read = readSizedMember(
          data.subarray(offset),
          { name: movedTo, offset, episode: keptIds.length + 1 },
          maxRecord,
        );
        if (read.kind === "member") {
          const good = records(strFromU8(read.payload));
          if (good) {
            keptIds.push(...good.map((t) => t.episodeId));
            keptBytes.push(data.subarray(offset, offset + read.length));
            offset += read.length;
            continue;
          }
          reason = "member holds a record that is not a valid trajectory";
        } else reason = "torn tail (incomplete last episode)";
      } catch (err) {
        reason = (err as Error).message;
      }
      const next = nextMemberStart(data, offset + 1);
      const end = next < 0 ? data.length : next;
      dropped.push({ byteOffset: offset, bytes: end - offset, reason });
      offset = end;
    }
  } else {
    let offset = 0;
    while (offset < data.length) {
      const nl = data.indexOf(0x0a, offset);
      const end = nl < 0 ? data.length : nl + 1;
      const line = strFromU8(data.subarray(offset, end));
      if (line.trim() !== "") {
        const good = records(line);
        if (good) {
          keptIds.push(...good.map((t) => t.episodeId));
          keptBytes.push(nl < 0 ? strToU8(`${line}\n`) : data.subarray(offset, end));
        } else dropped.push({ byteOffset: offset, bytes: end - offset, reason: "not a valid trajectory line" });
      }
      offset = end;
    }
  }
  const out = await openAtomic(path);
  try {
    for (const b of keptBytes) await out.write(b);
    await out.commit();
  } catch (err) {
    await out.abort();
    throw err;
  }
  return { movedTo, keptIds, dropped };
}

export interface TrajectoryWriterOptions {
  /** "resume" (default) keeps finished episodes and cuts a torn tail; "overwrite" starts empty. */
  mode?: "resume" | "overwrite";
  /** fsync after each episode (default true): an episode reported written survives a power loss. */
  sync?: boolean;
  /**
   * What resuming does with a file damaged anywhere but a torn tail: "throw" (default) stops with
   * the TrajectoryFileError naming offset and episode; "move-aside" runs repairTrajectoryFile
   * (the damaged file is renamed, never deleted, and every intact episode is kept).
   */
  onCorrupt?: "throw" | "move-aside";
  /**
   * "inline" (default) keeps wall-clock timings in each record. "sidecar" writes them to
   * `<path>.timings.jsonl` and zeroes them in the records, so two runs with the same seeds write
   * byte-identical trajectory files whose SHA-256 can be compared.
   */
  timings?: "inline" | "sidecar";
  /** Caps used when scanning the existing file. */
  limits?: TrajectoryReadLimits;
}

/** Appends trajectories to a file as they finish. Writes are serialised; safe to call concurrently. */
export class TrajectoryWriter {
  private readonly finished = new Set<string>();
  private queue: Promise<void> = Promise.resolve();
  private closed = false;
  private directorySynced = false;
  /** Number of episodes already in the file when it was opened. */
  readonly resumedCount: number;
  /** Whether opening cut an incomplete episode off the end. */
  readonly repairedTornTail: boolean;
  /** Set when opening repaired a damaged file (option `onCorrupt: "move-aside"`). */
  readonly repair: TrajectoryRepairReport | null;

  private constructor(
    readonly path: string,
    private readonly sync: boolean,
    private readonly timings: "inline" | "sidecar",
    existing: string[],
    repairedTornTail: boolean,
    repair: TrajectoryRepairReport | null,
  ) {
    for (const id of existing) this.finished.add(id);
    this.resumedCount = existing.length;
    this.repairedTornTail = repairedTornTail;
    this.repair = repair;
  }

  static async open(path: string, options: TrajectoryWriterOptions = {}): Promise<TrajectoryWriter> {
    const mode = options.mode ?? "resume";
    const sync = options.sync ?? true;
    const timings = options.timings ?? "inline";
    await mkdir(dirname(path), { recursive: true });
    if (mode === "overwrite") {
      await rm(path, { force: true });
      if (timings === "sidecar") await rm(`${path}.timings.jsonl`, { force: true });
      return new TrajectoryWriter(path, sync, timings, [], false, null);
    }
    const exists = await stat(path).then(
      () => true,
      () => false,
    );
    if (!exists) return new TrajectoryWriter(path, sync, timings, [], false, null);
    const ids: string[] = [];
    let scan: ScanResult;
    try {
      scan = await scanTrajectories(path, (t) => ids.push(t.episodeId), options.limits);
    } catch (err) {
      const repairable = err instanceof TrajectoryFileError && (err.problem === "corrupt" || err.problem === "garbage");
      if (!repairable || options.onCorrupt !== "move-aside") throw err;
      const report = await repairTrajectoryFile(path, options.limits);
      return new TrajectoryWriter(path, sync, timings, report.keptIds, false, report);
    }
    if (scan.torn) {
      await truncate(path, scan.validBytes);
      const handle = await open(path, "r+");
      await handle.sync().finally(() => handle.close());
    } else if (!isGzipPath(path) && scan.validBytes > 0) {
      // A last record whose newline was never written: complete the line before appending.
      const handle = await open(path, "r");
      const last = new Uint8Array(1);
      await handle.read(last, 0, 1, scan.validBytes - 1).finally(() => handle.close());
      if (last[0] !== 0x0a) await appendFile(path, "\n");
    }
    return new TrajectoryWriter(path, sync, timings, ids, scan.torn, null);
  }

  /** Whether an episode with this id is already in the file. */
  has(episodeId: string): boolean {
    return this.finished.has(episodeId);
  }

  get episodeIds(): ReadonlySet<string> {
    return this.finished;
  }

  /** Appends one finished episode; resolves once it is on disk (and synced). */
  append(trajectory: Trajectory): Promise<void> {
    if (this.closed) return Promise.reject(new TrajectoryFileError(`${this.path}: writer is closed`, "usage"));
    const record = this.timings === "sidecar" ? withoutTimings(trajectory) : trajectory;
    const bytes = encodeJsonl([record], isGzipPath(this.path));
    const write = async () => {
      if (this.timings === "sidecar") {
        const side = {
          episodeId: trajectory.episodeId,
          timings: trajectory.timings,
          turns: trajectory.turns.map((t) => t.timings),
        };
        await appendFile(`${this.path}.timings.jsonl`, `${JSON.stringify(side)}\n`);
      }
      const handle = await open(this.path, "a");
      try {
        await handle.write(bytes);
        if (this.sync) await handle.sync();
      } finally {
        await handle.close();
      }
      // The first append may have created the file: its directory entry must be durable too.
      if (this.sync && !this.directorySynced) {
        await syncDirectory(dirname(this.path));
        this.directorySynced = true;
      }
      this.finished.add(trajectory.episodeId);
    };
    const next = this.queue.then(write);
    this.queue = next.catch(() => {});
    return next;
  }

  /** Waits for pending appends. */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
  }
}

/** The trajectory with every wall-clock field zeroed (its content otherwise unchanged). */
export function withoutTimings(t: Trajectory): Trajectory {
  return {
    ...t,
    timings: { startedAt: 0, durationMs: 0 },
    turns: t.turns.map((turn) => ({ ...turn, timings: { startedAt: 0, generateMs: 0, stepMs: 0 } })),
  };
}
