// Trajectory files: JSONL, gzip-compressed when the name ends in ".gz", appended one episode at a
// time (one sized gzip member per episode, see gzip-members.ts) and synced, so a crash loses at
// most the episode in flight. Reopening with mode "resume" cuts a torn tail and reports which
// episodes are finished, so a rerun skips them. Node only (node:fs).

import { mkdir, open, rm, stat, truncate } from "node:fs/promises";
import { dirname } from "node:path";
import { TrajectoryFileError } from "./errors.js";
import { GZIP_MEMBER_HEADER_BYTES, sizedMemberLength } from "./gzip-members.js";
import { decodeJsonl, encodeJsonl, isGzipPath } from "./jsonl.js";
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
    );
  }
  const parsed = trajectorySchema.safeParse(record);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TrajectoryFileError(
      `${where}: not a kiln trajectory: ${issue.path.join(".") || "(root)"}: ${issue.message}`,
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

const CHUNK = 1 << 20;

/**
 * Streams a trajectory file episode by episode (memory: one episode plus a 1 MiB buffer), so
 * resuming a run of any size needs no more than its ids. A torn last episode is reported, not passed on.
 */
export async function scanTrajectories(path: string, onTrajectory: (t: Trajectory) => void): Promise<ScanResult> {
  const handle = await open(path, "r");
  try {
    const size = (await handle.stat()).size;
    let buf: Uint8Array = new Uint8Array(0);
    let bufStart = 0; // file offset of buf[0]
    let fileAt = 0; // next byte to read
    let count = 0;
    // Makes buf hold [offset, offset + n) when the file has it; returns whether it does.
    const ensure = async (offset: number, n: number): Promise<boolean> => {
      if (offset - bufStart + n <= buf.length) return true;
      if (offset + n > size) return false;
      const keep = buf.subarray(offset - bufStart);
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
    const emit = (record: unknown) => {
      count++;
      onTrajectory(checkTrajectoryRecord(record, `${path}: record ${count}`));
    };
    let offset = 0;
    if (isGzipPath(path)) {
      while (offset < size) {
        if (!(await ensure(offset, Math.min(GZIP_MEMBER_HEADER_BYTES, size - offset)))) break;
        const header = buf.subarray(offset - bufStart, offset - bufStart + GZIP_MEMBER_HEADER_BYTES);
        const memberSize = sizedMemberLength(header);
        if (memberSize === null) {
          if (size - offset < GZIP_MEMBER_HEADER_BYTES && header[0] === 0x1f)
            return { count, torn: true, validBytes: offset };
          // Not written by TrajectoryWriter (e.g. recompressed by another tool): decode the rest at once.
          const rest = new Uint8Array(size - offset);
          await handle.read(rest, 0, rest.length, offset);
          const decoded = decodeJsonlOrThrow(rest, true, path);
          decoded.records.forEach(emit);
          return { count, torn: decoded.torn, validBytes: offset + decoded.validBytes };
        }
        if (!(await ensure(offset, memberSize))) return { count, torn: true, validBytes: offset };
        const member = buf.subarray(offset - bufStart, offset - bufStart + memberSize);
        const decoded = decodeJsonlOrThrow(member, true, path);
        if (decoded.torn) return { count, torn: true, validBytes: offset };
        decoded.records.forEach(emit);
        offset += memberSize;
      }
      return { count, torn: offset < size, validBytes: offset };
    }
    // Plain JSONL: line by line.
    const decoder = new TextDecoder();
    while (offset < size) {
      await ensure(offset, Math.min(CHUNK, size - offset));
      const view = buf.subarray(offset - bufStart);
      const nl = view.indexOf(0x0a);
      if (nl < 0) {
        if (offset - bufStart + view.length >= size - bufStart) return { count, torn: true, validBytes: offset };
        await ensure(offset, view.length + 1); // a line longer than the buffer: grow it
        continue;
      }
      const line = decoder.decode(view.subarray(0, nl));
      if (line.trim() !== "") {
        try {
          emit(JSON.parse(line));
        } catch (err) {
          if (err instanceof TrajectoryFileError) throw err;
          throw new TrajectoryFileError(`${path}: line at byte ${offset} is not valid JSON: ${(err as Error).message}`);
        }
      }
      offset += nl + 1;
    }
    return { count, torn: false, validBytes: offset };
  } finally {
    await handle.close();
  }
}

function decodeJsonlOrThrow(data: Uint8Array, gzip: boolean, name: string) {
  try {
    return decodeJsonl(data, gzip, name);
  } catch (err) {
    if (err instanceof TrajectoryFileError) throw err;
    throw new TrajectoryFileError((err as Error).message);
  }
}

/** Reads every complete trajectory of a file; a torn last episode is skipped and reported. */
export async function readTrajectories(path: string): Promise<ReadTrajectoriesResult> {
  const trajectories: Trajectory[] = [];
  const { torn, validBytes } = await scanTrajectories(path, (t) => trajectories.push(t));
  return { trajectories, torn, validBytes };
}

export interface TrajectoryWriterOptions {
  /** "resume" (default) keeps finished episodes and cuts a torn tail; "overwrite" starts empty. */
  mode?: "resume" | "overwrite";
  /** fsync after each episode (default true): an episode reported written survives a power loss. */
  sync?: boolean;
}

/** Appends trajectories to a file as they finish. Writes are serialised; safe to call concurrently. */
export class TrajectoryWriter {
  private readonly finished = new Set<string>();
  private queue: Promise<void> = Promise.resolve();
  private closed = false;
  /** Number of episodes already in the file when it was opened. */
  readonly resumedCount: number;
  /** Whether opening cut an incomplete episode off the end. */
  readonly repairedTornTail: boolean;

  private constructor(
    readonly path: string,
    private readonly sync: boolean,
    existing: string[],
    repaired: boolean,
  ) {
    for (const id of existing) this.finished.add(id);
    this.resumedCount = existing.length;
    this.repairedTornTail = repaired;
  }

  static async open(path: string, options: TrajectoryWriterOptions = {}): Promise<TrajectoryWriter> {
    const mode = options.mode ?? "resume";
    const sync = options.sync ?? true;
    await mkdir(dirname(path), { recursive: true });
    if (mode === "overwrite") {
      await rm(path, { force: true });
      return new TrajectoryWriter(path, sync, [], false);
    }
    const exists = await stat(path).then(
      () => true,
      () => false,
    );
    if (!exists) return new TrajectoryWriter(path, sync, [], false);
    const ids: string[] = [];
    const scan = await scanTrajectories(path, (t) => ids.push(t.episodeId));
    if (scan.torn) await truncate(path, scan.validBytes);
    return new TrajectoryWriter(path, sync, ids, scan.torn);
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
    if (this.closed) return Promise.reject(new TrajectoryFileError(`${this.path}: writer is closed`));
    const bytes = encodeJsonl([trajectory], isGzipPath(this.path));
    const write = async () => {
      const handle = await open(this.path, "a");
      try {
        await handle.write(bytes);
        if (this.sync) await handle.sync();
      } finally {
        await handle.close();
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
