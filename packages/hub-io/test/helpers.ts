import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function tempDir(prefix = "hub-io-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A safetensors file from a header string and data bytes, with the header size computed. */
export function craft(header: string, data: Uint8Array = new Uint8Array(0), sizeOverride?: bigint): Uint8Array {
  const h = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + h.byteLength + data.byteLength);
  new DataView(out.buffer).setBigUint64(0, sizeOverride ?? BigInt(h.byteLength), true);
  out.set(h, 8);
  out.set(data, 8 + h.byteLength);
  return out;
}

export function hex(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, "hex"));
}
