// Streaming SHA-256 (FIPS 180-4) in plain TypeScript, so hashing works the same in browsers and
// Node; file hashing in Node uses node:crypto for speed and is checked against this implementation.

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

/** Incremental SHA-256: `new Sha256().update(a).update(b).hex()`. */
export class Sha256 {
  private readonly h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  private readonly block = new Uint8Array(64);
  private readonly w = new Uint32Array(64);
  private fill = 0;
  private length = 0;
  private done = false;

  update(data: Uint8Array): this {
    if (this.done) throw new Error("Sha256: update after digest");
    this.length += data.byteLength;
    let i = 0;
    if (this.fill > 0) {
      const take = Math.min(64 - this.fill, data.byteLength);
      this.block.set(data.subarray(0, take), this.fill);
      this.fill += take;
      i = take;
      if (this.fill < 64) return this;
      this.compress(this.block, 0);
      this.fill = 0;
    }
    for (; i + 64 <= data.byteLength; i += 64) this.compress(data, i);
    if (i < data.byteLength) {
      this.block.set(data.subarray(i), 0);
      this.fill = data.byteLength - i;
    }
    return this;
  }

  digest(): Uint8Array {
    if (!this.done) {
      const bits = this.length * 8;
      const pad = new Uint8Array((this.fill < 56 ? 56 : 120) - this.fill + 8);
      pad[0] = 0x80;
      const dv = new DataView(pad.buffer);
      dv.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
      dv.setUint32(pad.length - 4, bits >>> 0);
      this.update(pad);
      this.done = true;
    }
    const out = new Uint8Array(32);
    const dv = new DataView(out.buffer);
    for (let i = 0; i < 8; i++) dv.setUint32(i * 4, this.h[i]);
    return out;
  }

  hex(): string {
    return [...this.digest()].map((b) => b.toString(16).padStart(2, "0")).join("");
  }

  private compress(data: Uint8Array, off: number): void {
    const w = this.w;
    for (let t = 0; t < 16; t++) {
      const j = off + t * 4;
      w[t] = (data[j] << 24) | (data[j + 1] << 16) | (data[j + 2] << 8) | data[j + 3];
    }
    for (let t = 16; t < 64; t++) {
      const a = w[t - 15];
      const b = w[t - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
    }
    const h = this.h;
    let [a, b, c, d, e, f, g, hh] = [h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]];
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + S1 + ch + K[t] + w[t]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + maj) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
  }
}

/** Hex SHA-256 of bytes (or a UTF-8 string). */
export function sha256Hex(data: Uint8Array | string): string {
  return new Sha256().update(typeof data === "string" ? new TextEncoder().encode(data) : data).hex();
}

/** Hex SHA-256 of a stream of chunks (bounded memory). */
export async function sha256Chunks(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<string> {
  const h = new Sha256();
  for await (const c of chunks) h.update(c);
  return h.hex();
}

/** Hex SHA-256 of a Blob, read in slices of `chunkSize`. */
export async function sha256Blob(blob: Blob, chunkSize = 8 << 20): Promise<string> {
  const h = new Sha256();
  for (let off = 0; off < blob.size; off += chunkSize) {
    h.update(new Uint8Array(await blob.slice(off, off + chunkSize).arrayBuffer()));
  }
  return h.hex();
}

/** Hex SHA-256 of a file, streamed (Node; node:crypto). */
export async function sha256File(path: string): Promise<string> {
  const { createHash } = await import("node:crypto");
  const { createReadStream } = await import("node:fs");
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 4 << 20 })) hash.update(chunk as Uint8Array);
  return hash.digest("hex");
}

/** Hex SHA-256 of one tensor's data bytes, streamed from a SafetensorsFile-like reader. */
export async function sha256Tensor(
  file: { chunks(name: string, chunkSize?: number): AsyncIterable<Uint8Array> },
  name: string,
): Promise<string> {
  return sha256Chunks(file.chunks(name));
}
