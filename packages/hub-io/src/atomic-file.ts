// Atomic file writes (temp file in the same directory + rename), Node only: the one home of
// writeFileAtomic and syncDirectory for every package (docs/ARCHITECTURE.md §Concepts).
// A reader never sees a half-written checkpoint: either the old file or the complete new one.
// Commit fsyncs the file before the rename and the directory after it, so after a power loss
// the path holds either the old file or the complete new one, never an empty or partial file.

export interface AtomicWriter {
  /** Append bytes (awaits the OS write). */
  write(bytes: Uint8Array): Promise<void>;
  /** fsync, close, rename over the destination, fsync the directory. */
  commit(): Promise<void>;
  /** Close and delete the temp file. */
  abort(): Promise<void>;
}

let counter = 0;

/** A temporary name beside `path`, unique within this process and across processes. */
function tempNameFor(path: string): string {
  return `${path}.tmp-${process.pid}-${Date.now().toString(36)}-${counter++}`;
}

export async function openAtomic(path: string): Promise<AtomicWriter> {
  const fs = await import("node:fs/promises");
  const { dirname } = await import("node:path");
  await fs.mkdir(dirname(path), { recursive: true });
  const tmp = tempNameFor(path);
  const handle = await fs.open(tmp, "w");
  let done = false;
  return {
    async write(bytes) {
      let off = 0;
      while (off < bytes.byteLength) {
        const { bytesWritten } = await handle.write(bytes, off, bytes.byteLength - off);
        off += bytesWritten;
      }
    },
    async commit() {
      if (done) return;
      done = true;
      try {
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
        await fs.rename(tmp, path);
      } catch (err) {
        await fs.rm(tmp, { force: true }).catch(() => {});
        throw err;
      }
      await syncDirectory(dirname(path));
    },
    async abort() {
      if (done) return;
      done = true;
      await handle.close().catch(() => {});
      await fs.rm(tmp, { force: true });
    },
  };
}

/** fsync a directory so a rename in it is durable (skipped where directories cannot be opened, e.g. Windows). */
export async function syncDirectory(dir: string): Promise<void> {
  const fs = await import("node:fs/promises");
  let handle: Awaited<ReturnType<typeof fs.open>> | undefined;
  try {
    handle = await fs.open(dir, "r");
    await handle.sync();
  } catch {
    // Opening or syncing a directory is not supported on every platform; the rename stands.
  } finally {
    await handle?.close();
  }
}

/** Write a whole file atomically. Strings are written as UTF-8. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const w = await openAtomic(path);
  try {
    await w.write(typeof data === "string" ? new TextEncoder().encode(data) : data);
    await w.commit();
  } catch (e) {
    await w.abort();
    throw e;
  }
}

/**
 * writeFileAtomic for synchronous callers (report writers that run inside synchronous code): the
 * same temp + fsync + rename + directory fsync, with `node:fs` passed in because a synchronous
 * function cannot import it lazily and this package must still load in browsers.
 */
export function writeFileAtomicSync(fs: SyncFs, path: string, data: Uint8Array | string): void {
  const dir = path.slice(0, Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\")) + 1) || ".";
  fs.mkdirSync(dir, { recursive: true });
  const tmp = tempNameFor(path);
  const fd = fs.openSync(tmp, "w");
  try {
    try {
      fs.writeFileSync(fd, data);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, path);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  let dirFd: number | undefined;
  try {
    dirFd = fs.openSync(dir, "r");
    fs.fsyncSync(dirFd);
  } catch {
    // As syncDirectory: not every platform can open or sync a directory; the rename stands.
  } finally {
    if (dirFd !== undefined) fs.closeSync(dirFd);
  }
}

/** The part of `node:fs` writeFileAtomicSync uses. */
export interface SyncFs {
  mkdirSync(path: string, options: { recursive: true }): unknown;
  openSync(path: string, flags: string): number;
  writeFileSync(fd: number, data: Uint8Array | string): void;
  fsyncSync(fd: number): void;
  closeSync(fd: number): void;
  renameSync(from: string, to: string): void;
  rmSync(path: string, options: { force: true }): void;
}

/** Read a whole file (Node). */
export async function readFileBytes(path: string): Promise<Uint8Array> {
  const fs = await import("node:fs/promises");
  const buf = await fs.readFile(path);
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

export async function readFileText(path: string): Promise<string> {
  const fs = await import("node:fs/promises");
  return fs.readFile(path, "utf8");
}
