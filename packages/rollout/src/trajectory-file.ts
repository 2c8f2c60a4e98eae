// Trajectory files: JSONL, gzip-compressed when the name ends in ".gz", appended one episode at a
// time (one sized gzip member per episode, see gzip-members.ts) and synced, so a crash loses at
// most the episode in flight. Reopening with mode "resume" cuts a torn tail and reports which
// episodes are finished, so a rerun skips them. Node only (node:fs).

import { open, readFile, rm, stat, truncate } from "node:fs/promises";
import { TrajectoryFileError } from "./errors.js";
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

/** Reads every complete trajectory of a file; a torn last episode is skipped and reported. */
export async function readTrajectories(path: string): Promise<ReadTrajectoriesResult> {
  const data = await readFile(path);
  let decoded: ReturnType<typeof decodeJsonl>;
  try {
    decoded = decodeJsonl(data, isGzipPath(path), path);
  } catch (err) {
    if (err instanceof TrajectoryFileError) throw err;
    throw new TrajectoryFileError((err as Error).message);
  }
  const trajectories = decoded.records.map((r, i) => checkTrajectoryRecord(r, `${path}: record ${i + 1}`));
  return { trajectories, torn: decoded.torn, validBytes: decoded.validBytes };
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
    existing: Trajectory[],
    repaired: boolean,
  ) {
    for (const t of existing) this.finished.add(t.episodeId);
    this.resumedCount = existing.length;
    this.repairedTornTail = repaired;
  }

  static async open(path: string, options: TrajectoryWriterOptions = {}): Promise<TrajectoryWriter> {
    const mode = options.mode ?? "resume";
    const sync = options.sync ?? true;
    if (mode === "overwrite") {
      await rm(path, { force: true });
      return new TrajectoryWriter(path, sync, [], false);
    }
    const exists = await stat(path).then(
      () => true,
      () => false,
    );
    if (!exists) return new TrajectoryWriter(path, sync, [], false);
    const read = await readTrajectories(path);
    if (read.torn) await truncate(path, read.validBytes);
    return new TrajectoryWriter(path, sync, read.trajectories, read.torn);
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
