// Atomic file writes (temp file in the same directory + rename), Node only.
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

export async function openAtomic(path: string): Promise<AtomicWriter> {
  const fs = await import("node:fs/promises");
  const { dirname } = await import("node:path");
  await fs.mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${Date.now().toString(36)}-${counter++}`;
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
