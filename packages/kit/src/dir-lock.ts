// An exclusive lock on a directory a command writes (a run directory, a model or adapter output, a
// directory whose SHA256SUMS is rewritten): `<dir>.lock` beside it, created with O_EXCL, holding the
// holder's pid, host, command and start time. Beside rather than inside, so that replacing the directory
// (--overwrite, temp + rename) keeps the lock and SHA256SUMS never lists it. A lock whose holder is gone
// (same host, pid not running) is stale and taken over; one held by another host is never guessed about.
import { hostname } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";

export interface DirLockHolder {
  pid: number;
  host: string;
  command: string;
  startedAt: string;
}

/** The directory is locked by a live process (or one on another host): names the holder. */
export class DirLockError extends Error {
  constructor(
    readonly dir: string,
    readonly holder: DirLockHolder,
    readonly lockFile: string,
  ) {
    super(
      `${dir} is in use by pid ${holder.pid} on ${holder.host} (${holder.command}, since ${holder.startedAt}); wait for it to finish${
        holder.host === hostname() ? "" : `, or if that host no longer runs it, delete ${lockFile}`
      }`,
    );
    this.name = "DirLockError";
  }
}

export interface DirLock {
  readonly dir: string;
  readonly file: string;
  release(): void;
}

/** Locks this process holds, by lock file: a second acquire from the same process is refused too. */
const held = new Map<string, DirLock>();
let exitHookInstalled = false;

function lockFileOf(dir: string): string {
  const abs = resolve(dir);
  return join(dirname(abs), `${basename(abs)}.lock`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readHolder(file: string): DirLockHolder | undefined {
  try {
    const h = JSON.parse(readFileSync(file, "utf8")) as DirLockHolder;
    return typeof h.pid === "number" && typeof h.host === "string" ? h : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Take the lock of `dir` for this process (released by `release()` or at exit). `command` is recorded for
 * whoever is refused. Throws DirLockError naming the holder when a live process holds it.
 */
export function acquireDirLock(dir: string, command: string, warn: (line: string) => void = console.error): DirLock {
  const file = lockFileOf(dir);
  mkdirSync(dirname(file), { recursive: true });
  const mine: DirLockHolder = { pid: process.pid, host: hostname(), command, startedAt: new Date().toISOString() };
  for (let attempt = 0; attempt < 3; attempt++) {
    const inProcess = held.get(file);
    if (inProcess) throw new DirLockError(resolve(dir), readHolder(file) ?? mine, file);
    let fd: number;
    try {
      fd = openSync(file, "wx");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const holder = readHolder(file);
      if (holder && (holder.host !== mine.host || alive(holder.pid)))
        throw new DirLockError(resolve(dir), holder, file);
      // Stale (its process is gone) or unreadable (a holder killed while writing it): move it aside
      // atomically, then check that what moved is what was judged stale — a racing process may have
      // replaced it with a live lock meanwhile, which is then put back.
      const aside = `${file}.stale-${process.pid}`;
      try {
        renameSync(file, aside);
      } catch {
        continue;
      }
      const moved = readHolder(aside);
      if (moved && holder && (moved.pid !== holder.pid || moved.startedAt !== holder.startedAt)) {
        try {
          renameSync(aside, file);
        } catch {
          // the racer's lock is gone either way; it will find out on release
        }
        continue;
      }
      rmSync(aside, { force: true });
      if (holder)
        warn(`note: took over the lock of ${dir} left by pid ${holder.pid} (${holder.command}), no longer running`);
      continue;
    }
    writeSync(fd, `${JSON.stringify(mine)}\n`);
    closeSync(fd);
    const lock: DirLock = {
      dir: resolve(dir),
      file,
      release: () => {
        if (held.get(file) !== lock) return;
        held.delete(file);
        if (readHolder(file)?.pid === process.pid) rmSync(file, { force: true });
      },
    };
    held.set(file, lock);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on("exit", () => {
        for (const l of [...held.values()]) l.release();
      });
    }
    return lock;
  }
  throw new DirLockError(resolve(dir), readHolder(file) ?? mine, file);
}

/** Run `fn` holding the locks of `dirs` (taken in a fixed order so two commands never deadlock). */
export async function withDirLocks<T>(dirs: readonly string[], command: string, fn: () => Promise<T>): Promise<T> {
  const locks: DirLock[] = [];
  try {
    for (const d of [...new Set(dirs.map((x) => resolve(x)))].sort()) locks.push(acquireDirLock(d, command));
    return await fn();
  } finally {
    for (const l of locks.reverse()) l.release();
  }
}
