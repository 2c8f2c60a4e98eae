// GGUF (llama.cpp's single-file format), version 3, read and written per the spec
// (ggml-org/ggml docs/gguf.md): little-endian; header = magic "GGUF", u32 version, u64 tensor count,
// u64 key/value count; then the key/values (u64-length strings, u32 value kind), then per tensor
// its name, u32 dimension count, u64 dimensions (ggml's ne[], innermost first), u32 ggml type and
// u64 offset into the data section; the data section starts at the next multiple of
// `general.alignment` (default 32) and every tensor's offset is a multiple of it.
//
// Shapes in this API are row-major like safetensors (outermost first): `[rows, cols]` is ggml
// ne = [cols, rows]. The reader is lazy over a ByteSource (only the header, then the tensors asked
// for, are read) and refuses malformed files with GgufError before allocating what they claim.

import { openAtomic } from "./atomic-file.js";
import { type ByteSource, type ByteSourceInput, bytesSource, toByteSource } from "./byte-source.js";
import { GgufError } from "./errors.js";
import { type GgmlType, ggmlByteSize, ggmlTypeFromId, ggmlTypeId, ggufDecode } from "./gguf-types.js";
import type { TensorBytes } from "./safetensors-write.js";

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** ggml's GGML_MAX_DIMS. */
export const GGUF_MAX_DIMS = 4;
/** ggml's GGML_MAX_NAME: tensor names are shorter than this (in UTF-8 bytes). */
export const GGUF_MAX_NAME = 64;
/** Longest metadata string the reader accepts (chat templates are kilobytes; this is a guard). */
export const GGUF_MAX_STRING = 64 << 20;
/** Largest header (metadata + tensor infos) the reader accepts. */
export const GGUF_MAX_HEADER = 1 << 30;

export type GgufScalarKind =
  | "u8"
  | "i8"
  | "u16"
  | "i16"
  | "u32"
  | "i32"
  | "f32"
  | "bool"
  | "string"
  | "u64"
  | "i64"
  | "f64";
export type GgufKind = GgufScalarKind | "array";

const KIND_IDS: Record<GgufKind, number> = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
};
const KIND_BY_ID = Object.fromEntries(Object.entries(KIND_IDS).map(([k, v]) => [v, k])) as Record<number, GgufKind>;
/** Smallest encoded size of one value of each kind (for bounding counts before allocating). */
const MIN_BYTES: Record<GgufKind, number> = {
  u8: 1,
  i8: 1,
  bool: 1,
  u16: 2,
  i16: 2,
  u32: 4,
  i32: 4,
  f32: 4,
  u64: 8,
  i64: 8,
  f64: 8,
  string: 8,
  array: 12,
};

export type GgufNumberKind = "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "f64";

/** A metadata value with its GGUF kind (the kind decides the bytes written). */
export type GgufValue =
  | { kind: GgufNumberKind; value: number }
  | { kind: "u64" | "i64"; value: bigint }
  | { kind: "bool"; value: boolean }
  | { kind: "string"; value: string }
  | { kind: "array"; itemKind: GgufKind; values: readonly GgufArrayItem[] | ArrayLike<number> };
export type GgufArrayItem = number | bigint | boolean | string | GgufValue;

export type GgufMetadata = Map<string, GgufValue>;

/** Constructors for metadata values: `ggufValue.u32(2)`, `ggufValue.array("string", tokens)`. */
export const ggufValue = {
  u8: (value: number): GgufValue => ({ kind: "u8", value }),
  i8: (value: number): GgufValue => ({ kind: "i8", value }),
  u16: (value: number): GgufValue => ({ kind: "u16", value }),
  i16: (value: number): GgufValue => ({ kind: "i16", value }),
  u32: (value: number): GgufValue => ({ kind: "u32", value }),
  i32: (value: number): GgufValue => ({ kind: "i32", value }),
  f32: (value: number): GgufValue => ({ kind: "f32", value }),
  f64: (value: number): GgufValue => ({ kind: "f64", value }),
  u64: (value: bigint | number): GgufValue => ({ kind: "u64", value: BigInt(value) }),
  i64: (value: bigint | number): GgufValue => ({ kind: "i64", value: BigInt(value) }),
  bool: (value: boolean): GgufValue => ({ kind: "bool", value }),
  string: (value: string): GgufValue => ({ kind: "string", value }),
  array: (itemKind: GgufKind, values: readonly GgufArrayItem[] | ArrayLike<number>): GgufValue => ({
    kind: "array",
    itemKind,
    values,
  }),
};

/** The plain JS value of a metadata entry (numbers, bigints, booleans, strings, arrays of them). */
export function ggufPlain(v: GgufValue): unknown {
  if (v.kind !== "array") return v.value;
  return Array.from(v.values as ArrayLike<GgufArrayItem>, (x) =>
    typeof x === "object" && x !== null ? ggufPlain(x as GgufValue) : x,
  );
}

export interface GgufTensorInfo {
  name: string;
  type: GgmlType;
  /** Row-major (outermost first); the reverse of ggml's ne[]. */
  shape: number[];
  /** Offset from the start of the data section. */
  offset: number;
  /** Bytes of data. */
  byteSize: number;
}

export interface GgufHeader {
  version: number;
  metadata: GgufMetadata;
  tensors: GgufTensorInfo[];
  alignment: number;
  /** File offset where the data section starts. */
  dataOffset: number;
}

// ---- reading --------------------------------------------------------------------------------

/** Thrown inside the parser when the bytes read so far end before the file does. */
class NeedMore {
  constructor(readonly end: number) {}
}

class Cursor {
  pos = 0;
  private readonly dv: DataView;
  private readonly dec = new TextDecoder("utf-8", { fatal: true });
  constructor(
    private readonly buf: Uint8Array,
    private readonly fileSize: number,
  ) {
    this.dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  remaining(): number {
    return this.fileSize - this.pos;
  }
  need(n: number, what: string): void {
    const end = this.pos + n;
    if (end > this.fileSize) {
      throw new GgufError(
        "Truncated",
        `file ends at byte ${this.fileSize} inside ${what} (needs ${n} bytes at ${this.pos})`,
      );
    }
    if (end > this.buf.byteLength) throw new NeedMore(end);
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.dv.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(what: string): bigint {
    this.need(8, what);
    const v = this.dv.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }
  /** A u64 count of items of at least `minBytes` each that must fit in the rest of the file. */
  count(what: string, minBytes: number): number {
    const c = this.u64(what);
    if (c * BigInt(minBytes) > BigInt(this.remaining())) {
      throw new GgufError(
        "AbsurdCount",
        `${what} is ${c}, more than the ${this.remaining()} bytes left in the file can hold`,
      );
    }
    return Number(c);
  }
  string(what: string): string {
    const len = this.u64(`length of ${what}`);
    if (len > BigInt(GGUF_MAX_STRING) || len > BigInt(this.remaining())) {
      throw new GgufError(
        "AbsurdSize",
        `${what} claims ${len} bytes (limit ${GGUF_MAX_STRING}, ${this.remaining()} bytes left in the file)`,
      );
    }
    const n = Number(len);
    this.need(n, what);
    const bytes = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    try {
      return this.dec.decode(bytes);
    } catch {
      throw new GgufError("InvalidUtf8", `${what} is not valid UTF-8`);
    }
  }
  scalar(kind: GgufScalarKind, what: string): number | bigint | boolean | string {
    switch (kind) {
      case "string":
        return this.string(what);
      case "u64":
      case "i64": {
        this.need(8, what);
        const v = kind === "u64" ? this.dv.getBigUint64(this.pos, true) : this.dv.getBigInt64(this.pos, true);
        this.pos += 8;
        return v;
      }
      case "bool": {
        this.need(1, what);
        const b = this.buf[this.pos++];
        if (b > 1) throw new GgufError("InvalidMetadata", `${what}: bool byte is ${b}, must be 0 or 1`);
        return b === 1;
      }
      default: {
        const size = MIN_BYTES[kind];
        this.need(size, what);
        const p = this.pos;
        this.pos += size;
        switch (kind) {
          case "u8":
            return this.dv.getUint8(p);
          case "i8":
            return this.dv.getInt8(p);
          case "u16":
            return this.dv.getUint16(p, true);
          case "i16":
            return this.dv.getInt16(p, true);
          case "u32":
            return this.dv.getUint32(p, true);
          case "i32":
            return this.dv.getInt32(p, true);
          case "f32":
            return this.dv.getFloat32(p, true);
          default:
            return this.dv.getFloat64(p, true);
        }
      }
    }
  }
  kind(what: string): GgufKind {
    const id = this.u32(what);
    const kind = KIND_BY_ID[id];
    if (kind === undefined) throw new GgufError("InvalidValueType", `${what} is ${id}, not a GGUF value type (0-12)`);
    return kind;
  }
  value(kind: GgufKind, what: string, depth: number): GgufValue {
    if (kind !== "array") {
      const v = this.scalar(kind, what);
      return { kind, value: v } as GgufValue;
    }
    const itemKind = this.kind(`item type of ${what}`);
    if (itemKind === "array" && depth >= 4) {
      throw new GgufError("InvalidValueType", `${what}: arrays nested deeper than 4 levels`);
    }
    const n = this.count(`item count of ${what}`, MIN_BYTES[itemKind]);
    if (itemKind === "array") {
      const values: GgufValue[] = [];
      for (let i = 0; i < n; i++) values.push(this.value("array", `${what}[${i}]`, depth + 1));
      return { kind: "array", itemKind, values };
    }
    const values: (number | bigint | boolean | string)[] = new Array(n);
    for (let i = 0; i < n; i++) values[i] = this.scalar(itemKind, `${what}[${i}]`);
    return { kind: "array", itemKind, values };
  }
}

function parseHeaderFrom(buf: Uint8Array, fileSize: number): GgufHeader {
  const c = new Cursor(buf, fileSize);
  if (fileSize < 4) throw new GgufError("Truncated", `file has ${fileSize} bytes, too short for the GGUF magic`);
  const magic = c.u32("magic");
  if (magic !== GGUF_MAGIC) {
    const text = [...buf.subarray(0, 4)].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    throw new GgufError("BadMagic", `not a GGUF file: starts with ${JSON.stringify(text)}, expected "GGUF"`);
  }
  const version = c.u32("version");
  if (version !== 2 && version !== 3) {
    throw new GgufError("UnsupportedVersion", `GGUF version ${version}; kiln reads versions 2 and 3`);
  }
  const tensorCount = c.count("tensor count", 24);
  const kvCount = c.count("metadata count", 13);
  const metadata: GgufMetadata = new Map();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key ${i}`);
    if (metadata.has(key)) throw new GgufError("DuplicateKey", `metadata key ${JSON.stringify(key)} appears twice`);
    const kind = c.kind(`value type of ${JSON.stringify(key)}`);
    metadata.set(key, c.value(kind, JSON.stringify(key), 0));
  }
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  const al = metadata.get("general.alignment");
  if (al !== undefined) {
    if (al.kind !== "u32" || al.value === 0 || (al.value & (al.value - 1)) !== 0) {
      throw new GgufError(
        "InvalidMetadata",
        `general.alignment must be a u32 power of two, got ${al.kind} ${JSON.stringify(ggufPlain(al), (_, v) => (typeof v === "bigint" ? v.toString() : v))}`,
      );
    }
    alignment = al.value;
  }
  const tensors: GgufTensorInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`tensor ${i} name`);
    if (new TextEncoder().encode(name).byteLength >= GGUF_MAX_NAME) {
      throw new GgufError("InvalidTensorInfo", `name is longer than ${GGUF_MAX_NAME - 1} bytes`, name);
    }
    if (names.has(name)) throw new GgufError("DuplicateTensor", "appears twice", name);
    names.add(name);
    const nDims = c.u32(`dimension count of ${name}`);
    if (nDims > GGUF_MAX_DIMS) {
      throw new GgufError("InvalidTensorInfo", `has ${nDims} dimensions; ggml allows at most ${GGUF_MAX_DIMS}`, name);
    }
    const ne: number[] = [];
    let elements = 1n;
    for (let d = 0; d < nDims; d++) {
      const v = c.u64(`dimension ${d} of ${name}`);
      elements *= v;
      if (v > BigInt(Number.MAX_SAFE_INTEGER) || elements > BigInt(Number.MAX_SAFE_INTEGER)) {
        throw new GgufError("AbsurdSize", `dimension ${d} = ${v} makes the element count overflow`, name);
      }
      ne.push(Number(v));
    }
    const typeId = c.u32(`type of ${name}`);
    const type = ggmlTypeFromId(typeId);
    if (type === undefined) throw new GgufError("UnknownTensorType", `ggml type id ${typeId} is not defined`, name);
    const offset = c.u64(`offset of ${name}`);
    if (offset > BigInt(fileSize)) {
      throw new GgufError("InvalidOffset", `offset ${offset} is past the end of the file (${fileSize} bytes)`, name);
    }
    if (Number(offset) % alignment !== 0) {
      throw new GgufError("InvalidOffset", `offset ${offset} is not a multiple of the alignment ${alignment}`, name);
    }
    const shape = ne.reverse();
    tensors.push({ name, type, shape, offset: Number(offset), byteSize: ggmlByteSize(type, shape, name) });
  }
  const dataOffset = Math.ceil(c.pos / alignment) * alignment;
  // Every tensor inside the file and no two overlapping.
  const byOffset = [...tensors].sort((a, b) => a.offset - b.offset);
  let end = 0;
  let prev: string | undefined;
  for (const t of byOffset) {
    if (t.offset < end) throw new GgufError("InvalidOffset", `overlaps tensor ${JSON.stringify(prev)}`, t.name);
    end = t.offset + t.byteSize;
    prev = t.name;
    if (dataOffset + end > fileSize) {
      throw new GgufError(
        "InvalidOffset",
        `data [${dataOffset + t.offset}, ${dataOffset + end}) runs past the end of the file (${fileSize} bytes)`,
        t.name,
      );
    }
  }
  return { version, metadata, tensors, alignment, dataOffset };
}

/** Parse a GGUF header from the bytes of a whole file (sync). */
export function parseGgufHeader(bytes: Uint8Array): GgufHeader {
  try {
    return parseHeaderFrom(bytes, bytes.byteLength);
  } catch (e) {
    if (e instanceof NeedMore) throw new GgufError("Truncated", "file ends inside the header");
    throw e;
  }
}

async function readHeader(source: ByteSource): Promise<GgufHeader> {
  let length = Math.min(source.size, 1 << 20);
  for (;;) {
    const buf = await source.read(0, length);
    try {
      return parseHeaderFrom(buf, source.size);
    } catch (e) {
      if (!(e instanceof NeedMore)) throw e;
      if (e.end > GGUF_MAX_HEADER) {
        throw new GgufError("AbsurdSize", `header is larger than ${GGUF_MAX_HEADER} bytes`);
      }
      length = Math.min(source.size, Math.max(length * 2, e.end));
    }
  }
}

/** A GGUF file opened lazily: the header is parsed, tensors are read when asked for. */
export class GgufFile implements GgufHeader {
  private readonly byName: Map<string, GgufTensorInfo>;
  private constructor(
    private readonly source: ByteSource,
    readonly header: GgufHeader,
  ) {
    this.byName = new Map(header.tensors.map((t) => [t.name, t]));
  }

  /** Open a path (Node), URL, Blob, bytes or ByteSource; malformed headers throw GgufError. */
  static async open(input: ByteSourceInput): Promise<GgufFile> {
    const source = await toByteSource(input);
    try {
      return new GgufFile(source, await readHeader(source));
    } catch (e) {
      await source.close();
      throw e;
    }
  }

  get version(): number {
    return this.header.version;
  }
  get metadata(): GgufMetadata {
    return this.header.metadata;
  }
  get tensors(): GgufTensorInfo[] {
    return this.header.tensors;
  }
  get alignment(): number {
    return this.header.alignment;
  }
  get dataOffset(): number {
    return this.header.dataOffset;
  }

  /** A metadata value as plain JS, or undefined when absent. */
  get(key: string): unknown {
    const v = this.header.metadata.get(key);
    return v === undefined ? undefined : ggufPlain(v);
  }

  info(name: string): GgufTensorInfo {
    const t = this.byName.get(name);
    if (!t) throw new GgufError("TensorNotFound", "is not in the file", name);
    return t;
  }

  /** The tensor's stored bytes. */
  async raw(name: string): Promise<Uint8Array> {
    const t = this.info(name);
    return this.source.read(this.header.dataOffset + t.offset, t.byteSize);
  }

  /** The tensor as float32 (F32/F16/BF16/Q8_0; other types throw UnsupportedTensorType). */
  async float32(name: string): Promise<Float32Array> {
    const t = this.info(name);
    return ggufDecode(t.type, await this.raw(name), numelOf(t.shape), name);
  }

  close(): Promise<void> {
    return this.source.close();
  }
}

function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Parse a whole GGUF file in memory; tensors' bytes are subarrays of `bytes`. */
export function parseGguf(bytes: Uint8Array): GgufHeader & { data: Map<string, Uint8Array> } {
  const header = parseGgufHeader(bytes);
  const src = bytesSource(bytes);
  const data = new Map(
    header.tensors.map((t) => [t.name, src.readSync(header.dataOffset + t.offset, t.byteSize)] as const),
  );
  return { ...header, data };
}

// ---- writing --------------------------------------------------------------------------------

export interface GgufTensorInput {
  name: string;
  type: GgmlType;
  /** Row-major (outermost first). */
  shape: readonly number[];
  data: TensorBytes;
}

export interface GgufPlan {
  /** Header + tensor infos + padding up to the data section. */
  prefix: Uint8Array;
  tensors: (GgufTensorInfo & { input: GgufTensorInput })[];
  alignment: number;
  fileSize: number;
}

class ByteWriter {
  private buf = new Uint8Array(1 << 16);
  private dv = new DataView(this.buf.buffer);
  length = 0;
  private readonly enc = new TextEncoder();
  private grow(n: number): void {
    if (this.length + n <= this.buf.byteLength) return;
    let cap = this.buf.byteLength * 2;
    while (cap < this.length + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.dv = new DataView(next.buffer);
  }
  u8(v: number): void {
    this.grow(1);
    this.dv.setUint8(this.length++, v);
  }
  u32(v: number): void {
    this.grow(4);
    this.dv.setUint32(this.length, v, true);
    this.length += 4;
  }
  u64(v: bigint | number): void {
    this.grow(8);
    this.dv.setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
  }
  string(s: string): void {
    const b = this.enc.encode(s);
    this.u64(b.byteLength);
    this.grow(b.byteLength);
    this.buf.set(b, this.length);
    this.length += b.byteLength;
  }
  scalar(kind: GgufScalarKind, v: unknown, what: string): void {
    const bad = () => {
      throw new GgufError("InvalidMetadata", `${what}: ${String(v)} is not a valid ${kind}`);
    };
    if (kind === "string") {
      if (typeof v !== "string") bad();
      this.string(v as string);
      return;
    }
    if (kind === "bool") {
      if (typeof v !== "boolean") bad();
      this.u8(v ? 1 : 0);
      return;
    }
    if (kind === "u64" || kind === "i64") {
      if (typeof v !== "bigint" && !(typeof v === "number" && Number.isSafeInteger(v))) bad();
      const b = BigInt(v as bigint | number);
      if (kind === "u64" ? b < 0n || b >= 1n << 64n : b < -(1n << 63n) || b >= 1n << 63n) bad();
      this.grow(8);
      if (kind === "u64") this.dv.setBigUint64(this.length, b, true);
      else this.dv.setBigInt64(this.length, b, true);
      this.length += 8;
      return;
    }
    if (typeof v !== "number") {
      bad();
      return;
    }
    const ranges: Partial<Record<GgufScalarKind, [number, number]>> = {
      u8: [0, 0xff],
      i8: [-0x80, 0x7f],
      u16: [0, 0xffff],
      i16: [-0x8000, 0x7fff],
      u32: [0, 0xffffffff],
      i32: [-0x80000000, 0x7fffffff],
    };
    const r = ranges[kind];
    if (r && (!Number.isInteger(v) || v < r[0] || v > r[1])) bad();
    const size = MIN_BYTES[kind];
    this.grow(size);
    const p = this.length;
    this.length += size;
    switch (kind) {
      case "u8":
        this.dv.setUint8(p, v);
        return;
      case "i8":
        this.dv.setInt8(p, v);
        return;
      case "u16":
        this.dv.setUint16(p, v, true);
        return;
      case "i16":
        this.dv.setInt16(p, v, true);
        return;
      case "u32":
        this.dv.setUint32(p, v, true);
        return;
      case "i32":
        this.dv.setInt32(p, v, true);
        return;
      case "f32":
        this.dv.setFloat32(p, v, true);
        return;
      default:
        this.dv.setFloat64(p, v, true);
    }
  }
  value(v: GgufValue, what: string): void {
    if (v.kind !== "array") {
      this.scalar(v.kind, v.value, what);
      return;
    }
    this.u32(KIND_IDS[v.itemKind]);
    const n = v.values.length;
    this.u64(n);
    for (let i = 0; i < n; i++) {
      const item = (v.values as ArrayLike<GgufArrayItem>)[i];
      if (v.itemKind === "array") {
        if (typeof item !== "object" || item === null || (item as GgufValue).kind !== "array") {
          throw new GgufError("InvalidMetadata", `${what}[${i}] must be an array value`);
        }
        const inner = item as GgufValue & { kind: "array" };
        this.u32(KIND_IDS[inner.itemKind]);
        this.u64(inner.values.length);
        for (let j = 0; j < inner.values.length; j++) {
          const x = (inner.values as ArrayLike<GgufArrayItem>)[j];
          if (inner.itemKind === "array") throw new GgufError("InvalidMetadata", `${what}[${i}]: nested too deep`);
          this.scalar(inner.itemKind, x, `${what}[${i}][${j}]`);
        }
      } else this.scalar(v.itemKind, item, `${what}[${i}]`);
    }
  }
  pad(alignment: number): void {
    const target = Math.ceil(this.length / alignment) * alignment;
    this.grow(target - this.length);
    this.buf.fill(0, this.length, target);
    this.length = target;
  }
  bytes(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

/** Lay out a GGUF file: the header bytes and each tensor's offset, validating names and shapes. */
export function planGguf(metadata: GgufMetadata, tensors: readonly GgufTensorInput[]): GgufPlan {
  const al = metadata.get("general.alignment");
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  if (al !== undefined) {
    if (al.kind !== "u32" || al.value === 0 || (al.value & (al.value - 1)) !== 0) {
      throw new GgufError("InvalidMetadata", "general.alignment must be a u32 power of two");
    }
    alignment = al.value;
  }
  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(tensors.length);
  w.u64(metadata.size);
  for (const [key, v] of metadata) {
    w.string(key);
    w.u32(KIND_IDS[v.kind]);
    w.value(v, JSON.stringify(key));
  }
  const names = new Set<string>();
  let offset = 0;
  const planned: GgufPlan["tensors"] = [];
  for (const t of tensors) {
    if (names.has(t.name)) throw new GgufError("DuplicateTensor", "appears twice", t.name);
    names.add(t.name);
    if (new TextEncoder().encode(t.name).byteLength >= GGUF_MAX_NAME) {
      throw new GgufError("InvalidTensorInfo", `name is longer than ${GGUF_MAX_NAME - 1} bytes`, t.name);
    }
    if (t.shape.length > GGUF_MAX_DIMS || t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) {
      throw new GgufError(
        "InvalidTensorInfo",
        `shape [${t.shape.join(", ")}] must have at most ${GGUF_MAX_DIMS} non-negative integer dimensions`,
        t.name,
      );
    }
    const size = ggmlByteSize(t.type, t.shape, t.name);
    if (t.data instanceof Uint8Array && t.data.byteLength !== size) {
      throw new GgufError("InvalidTensorInfo", `has ${t.data.byteLength} bytes, ${t.type} needs ${size}`, t.name);
    }
    w.string(t.name);
    w.u32(t.shape.length);
    for (let d = t.shape.length - 1; d >= 0; d--) w.u64(t.shape[d]);
    w.u32(ggmlTypeId(t.type));
    w.u64(offset);
    planned.push({ name: t.name, type: t.type, shape: [...t.shape], offset, byteSize: size, input: t });
    offset += Math.ceil(size / alignment) * alignment;
  }
  w.pad(alignment);
  const prefix = w.bytes();
  return { prefix, tensors: planned, alignment, fileSize: prefix.byteLength + offset };
}

/** The file's bytes in order: header, then each tensor padded to the alignment, checking lengths. */
export async function* ggufChunks(plan: GgufPlan): AsyncGenerator<Uint8Array> {
  yield plan.prefix;
  for (const t of plan.tensors) {
    const d = t.input.data;
    let got = 0;
    const chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array> =
      d instanceof Uint8Array ? [d] : typeof d === "function" ? [await d()] : d;
    for await (const chunk of chunks) {
      got += chunk.byteLength;
      if (got > t.byteSize) break;
      yield chunk;
    }
    if (got !== t.byteSize) {
      throw new GgufError(
        "InvalidTensorInfo",
        `produced ${got > t.byteSize ? "more than" : got} bytes, expected ${t.byteSize}`,
        t.name,
      );
    }
    const pad = Math.ceil(t.byteSize / plan.alignment) * plan.alignment - t.byteSize;
    if (pad > 0) yield new Uint8Array(pad);
  }
}

/** A whole GGUF file in memory (tensor data given as bytes or producers). */
export async function serializeGguf(metadata: GgufMetadata, tensors: readonly GgufTensorInput[]): Promise<Uint8Array> {
  const plan = planGguf(metadata, tensors);
  const out = new Uint8Array(plan.fileSize);
  let pos = 0;
  for await (const chunk of ggufChunks(plan)) {
    out.set(chunk, pos);
    pos += chunk.byteLength;
  }
  return out;
}

/**
 * Write a GGUF file atomically (temp + rename), one tensor (or chunk) in memory at a time, so a
 * multi-GB model never needs more than its largest tensor. Node only.
 */
export async function writeGgufFile(
  path: string,
  metadata: GgufMetadata,
  tensors: readonly GgufTensorInput[],
): Promise<GgufPlan> {
  const plan = planGguf(metadata, tensors);
  const w = await openAtomic(path);
  try {
    for await (const chunk of ggufChunks(plan)) await w.write(chunk);
    await w.commit();
  } catch (e) {
    await w.abort();
    throw e;
  }
  return plan;
}
