// Lazy safetensors reader: open parses only the header; each tensor is read on demand with one
// ranged read (file, Blob) or a zero-copy subarray (buffer).

import { type ByteSource, type ByteSourceInput, bytesSource, toByteSource } from "./byte-source.js";
import { type TensorData, toFloat32 } from "./dtypes.js";
import { SafetensorsError } from "./errors.js";
import { N_LEN, parseHeader, readHeaderSize, type SafetensorsHeader, type TensorEntry } from "./safetensors-header.js";

export class SafetensorsFile {
  private constructor(
    private readonly source: ByteSource,
    readonly header: SafetensorsHeader,
  ) {}

  /** Open a file path (Node), Blob, buffer or custom ByteSource and validate its header. */
  static async open(input: ByteSourceInput): Promise<SafetensorsFile> {
    const source = await toByteSource(input);
    try {
      const prefix = source.size >= N_LEN ? await source.read(0, N_LEN) : new Uint8Array(0);
      const n = readHeaderSize(prefix, source.size);
      const header = parseHeader(await source.read(N_LEN, n), source.size);
      return new SafetensorsFile(source, header);
    } catch (e) {
      await source.close();
      throw e;
    }
  }

  /** `__metadata__` (e.g. `{format: "pt"}`), or undefined. */
  get metadata(): Record<string, string> | undefined {
    return this.header.metadata;
  }

  /** Tensor names in file order. */
  keys(): string[] {
    return this.header.tensors.map((t) => t.name);
  }

  has(name: string): boolean {
    return this.header.byName.has(name);
  }

  /** dtype, shape and data offsets of one tensor. */
  info(name: string): TensorEntry {
    const t = this.header.byName.get(name);
    if (!t) throw new SafetensorsError("TensorNotFound", "no such tensor in this file", name);
    return t;
  }

  /** Raw little-endian bytes of one tensor. */
  async read(name: string): Promise<Uint8Array> {
    const t = this.info(name);
    return this.source.read(this.header.dataStart + t.dataOffsets[0], t.dataOffsets[1] - t.dataOffsets[0]);
  }

  /** `length` bytes of one tensor starting `offset` bytes into its data (for streaming). */
  async readRange(name: string, offset: number, length: number): Promise<Uint8Array> {
    const t = this.info(name);
    const size = t.dataOffsets[1] - t.dataOffsets[0];
    if (offset < 0 || length < 0 || offset + length > size) {
      throw new SafetensorsError(
        "InvalidOffset",
        `range [${offset}, ${offset + length}) is outside its ${size} bytes`,
        name,
      );
    }
    return this.source.read(this.header.dataStart + t.dataOffsets[0] + offset, length);
  }

  /** The tensor's bytes in chunks of at most `chunkSize` (bounded memory for hashing/copying). */
  async *chunks(name: string, chunkSize = 16 << 20): AsyncGenerator<Uint8Array> {
    const t = this.info(name);
    const size = t.dataOffsets[1] - t.dataOffsets[0];
    for (let off = 0; off < size; off += chunkSize) yield this.readRange(name, off, Math.min(chunkSize, size - off));
  }

  /** `{dtype, shape, data}` for one tensor. */
  async tensor(name: string): Promise<TensorData> {
    const t = this.info(name);
    return { dtype: t.dtype, shape: [...t.shape], data: await this.read(name) };
  }

  /** One tensor decoded to float32 (F32 from a file is zero-copy over the read buffer). */
  async readFloat32(name: string): Promise<Float32Array> {
    const t = this.info(name);
    return toFloat32({ dtype: t.dtype, data: await this.read(name) });
  }

  /**
   * Every tensor at once: the whole data section in one read into one buffer, each tensor a view
   * on it. The fastest way to load a full model (one allocation); use `read`/`readFloat32` to load
   * tensors one by one with memory bounded by the largest tensor.
   */
  async readAll(): Promise<Map<string, TensorData>> {
    const h = this.header;
    const data = await this.source.read(h.dataStart, this.source.size - h.dataStart);
    const out = new Map<string, TensorData>();
    for (const t of h.tensors) {
      out.set(t.name, { dtype: t.dtype, shape: [...t.shape], data: data.subarray(t.dataOffsets[0], t.dataOffsets[1]) });
    }
    return out;
  }

  async close(): Promise<void> {
    await this.source.close();
  }
}

/**
 * Parse a whole safetensors buffer synchronously; tensor data are zero-copy views into `bytes`.
 * Validation is the same as `SafetensorsFile.open`.
 */
export function parseSafetensors(bytes: Uint8Array): {
  metadata: Record<string, string> | undefined;
  tensors: Map<string, TensorData>;
} {
  const src = bytesSource(bytes);
  const n = readHeaderSize(bytes.subarray(0, Math.min(N_LEN, bytes.byteLength)), bytes.byteLength);
  const header = parseHeader(src.readSync(N_LEN, n), bytes.byteLength);
  const tensors = new Map<string, TensorData>();
  for (const t of header.tensors) {
    tensors.set(t.name, {
      dtype: t.dtype,
      shape: [...t.shape],
      data: src.readSync(header.dataStart + t.dataOffsets[0], t.dataOffsets[1] - t.dataOffsets[0]),
    });
  }
  return { metadata: header.metadata, tensors };
}
