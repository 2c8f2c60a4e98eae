// Random-access byte sources: an in-memory buffer, a Blob (browsers, Node ≥ 20) or a file (Node).
// The safetensors reader only ever asks for the ranges it needs, so a 5 GB file is never read whole.
// node:fs is imported dynamically inside `fileSource` so this module stays browser-safe.

import { HubIoError } from "./errors.js";

export interface ByteSource {
  /** Total size in bytes. */
  readonly size: number;
  /** Read exactly `length` bytes at `offset` into a fresh (or, for buffers, shared) Uint8Array. */
  read(offset: number, length: number): Promise<Uint8Array>;
  /** Release the underlying handle (a no-op for buffers and Blobs). */
  close(): Promise<void>;
}

function checkRange(size: number, offset: number, length: number): void {
  if (offset < 0 || length < 0 || offset + length > size) {
    throw new HubIoError(`read of ${length} bytes at ${offset} is outside the source (${size} bytes)`);
  }
}

/** A source over bytes already in memory; reads are zero-copy subarrays. */
export function bytesSource(
  bytes: Uint8Array | ArrayBuffer,
): ByteSource & { readSync(o: number, l: number): Uint8Array } {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const readSync = (offset: number, length: number) => {
    checkRange(u8.byteLength, offset, length);
    return u8.subarray(offset, offset + length);
  };
  return {
    size: u8.byteLength,
    readSync,
    read: async (offset, length) => readSync(offset, length),
    close: async () => {},
  };
}

/** A source over a Blob or File: each read slices the Blob, so only that range is loaded. */
export function blobSource(blob: Blob): ByteSource {
  return {
    size: blob.size,
    async read(offset, length) {
      checkRange(blob.size, offset, length);
      return new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer());
    },
    close: async () => {},
  };
}

/**
 * Bytes per read call. One read must stay under Node's ~2 GiB cap anyway; 8 MiB pieces also cost
 * less CPU than one huge read into a freshly mapped buffer (measured in bench/index.ts).
 */
const MAX_READ = 8 << 20;

/** A source over a file on disk (Node only). Each read allocates exactly the bytes asked for. */
export async function fileSource(path: string): Promise<ByteSource> {
  const fs = await import("node:fs/promises");
  const { Buffer } = await import("node:buffer");
  const handle = await fs.open(path, "r");
  let size: number;
  try {
    size = (await handle.stat()).size;
  } catch (e) {
    await handle.close();
    throw e;
  }
  let closed = false;
  return {
    size,
    async read(offset, length) {
      checkRange(size, offset, length);
      if (closed) throw new HubIoError(`file ${path} is closed`);
      // allocUnsafeSlow: an unpooled, unzeroed ArrayBuffer of its own, so views on it are aligned.
      const buf = Buffer.allocUnsafeSlow(length);
      let done = 0;
      while (done < length) {
        const { bytesRead } = await handle.read(buf, done, Math.min(MAX_READ, length - done), offset + done);
        if (bytesRead === 0) throw new HubIoError(`file ${path} ended early at byte ${offset + done}`);
        done += bytesRead;
      }
      return new Uint8Array(buf.buffer, buf.byteOffset, length);
    },
    async close() {
      if (!closed) {
        closed = true;
        await handle.close();
      }
    },
  };
}

/**
 * A source over an HTTP(S) URL that answers Range requests (the Hub's `resolve` URLs do), for
 * browsers and Node: the size comes from a `bytes=0-0` probe, each read is one ranged GET.
 */
export async function httpSource(
  url: string,
  opts: { fetch?: typeof fetch; headers?: Record<string, string> } = {},
): Promise<ByteSource> {
  const f = opts.fetch ?? fetch;
  const probe = await f(url, { headers: { ...opts.headers, Range: "bytes=0-0" } });
  const range = probe.headers.get("content-range");
  await probe.body?.cancel();
  const m = range ? /\/(\d+)$/.exec(range) : null;
  if (probe.status !== 206 || !m) {
    throw new HubIoError(`${url}: server did not answer a Range request (status ${probe.status}); cannot read lazily`);
  }
  const size = Number(m[1]);
  return {
    size,
    async read(offset, length) {
      checkRange(size, offset, length);
      if (length === 0) return new Uint8Array(0);
      const res = await f(url, { headers: { ...opts.headers, Range: `bytes=${offset}-${offset + length - 1}` } });
      if (res.status !== 206) throw new HubIoError(`${url}: ranged read answered ${res.status}`);
      const bytes = new Uint8Array(await res.arrayBuffer());
      if (bytes.byteLength !== length) {
        throw new HubIoError(`${url}: asked for ${length} bytes at ${offset}, got ${bytes.byteLength}`);
      }
      return bytes;
    },
    close: async () => {},
  };
}

export type ByteSourceInput = string | Blob | Uint8Array | ArrayBuffer | ByteSource;

/** Wrap any supported input as a ByteSource (http(s):// strings are URLs, other strings file paths). */
export async function toByteSource(input: ByteSourceInput): Promise<ByteSource> {
  if (typeof input === "string") return /^https?:\/\//.test(input) ? httpSource(input) : fileSource(input);
  if (input instanceof Uint8Array || input instanceof ArrayBuffer) return bytesSource(input);
  if (typeof Blob !== "undefined" && input instanceof Blob) return blobSource(input);
  return input as ByteSource;
}
