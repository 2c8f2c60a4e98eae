import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  ManifestError,
  SafetensorsFile,
  Sha256,
  parseManifest,
  serializeManifest,
  serializeSafetensors,
  sha256Blob,
  sha256File,
  sha256Hex,
  sha256Tensor,
  verifyManifest,
  writeManifest,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);
const nodeSha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("SHA-256", () => {
  it("matches known vectors and node:crypto for every length around block boundaries", () => {
    expect(sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const data = Uint8Array.from({ length: 300 }, (_, i) => (i * 7 + 3) & 255);
    for (let n = 0; n <= 300; n++) expect(sha256Hex(data.subarray(0, n))).toBe(nodeSha(data.subarray(0, n)));
  });

  it("streams: any chunking gives the same digest", async () => {
    const data = Uint8Array.from({ length: 10_000 }, (_, i) => (i * 31) & 255);
    const h = new Sha256();
    for (let off = 0, k = 1; off < data.length; off += k, k = (k * 3 + 1) % 97) h.update(data.subarray(off, off + k));
    expect(h.hex()).toBe(nodeSha(data));
    expect(await sha256Blob(new Blob([data]), 333)).toBe(nodeSha(data));
    const path = join(tmp.dir, "blob.bin");
    writeFileSync(path, data);
    expect(await sha256File(path)).toBe(nodeSha(data));
  });

  it("hashes one tensor of a safetensors file in chunks", async () => {
    const t = Uint8Array.from({ length: 4096 }, (_, i) => i & 255);
    const bytes = serializeSafetensors({
      a: { dtype: "U8", shape: [4096], data: t },
      b: { dtype: "U8", shape: [1], data: new Uint8Array(1) },
    });
    const f = await SafetensorsFile.open(bytes);
    expect(await sha256Tensor(f, "a")).toBe(nodeSha(t));
  });
});

describe("SHA256SUMS manifests", () => {
  it("writes sha256sum's format for a directory and detects a flipped byte, a missing and an extra file", async () => {
    const dir = join(tmp.dir, "run");
    mkdirSync(join(dir, "checkpoints/step-1"), { recursive: true });
    writeFileSync(join(dir, "config.json"), '{"lr": 0.001}\n');
    writeFileSync(join(dir, "checkpoints/step-1/adapter_model.safetensors"), new Uint8Array(1000).fill(7));
    writeFileSync(join(dir, "metrics.jsonl"), "");
    const entries = await writeManifest(dir);
    expect(entries.map((e) => e.path)).toEqual([
      "checkpoints/step-1/adapter_model.safetensors",
      "config.json",
      "metrics.jsonl",
    ]);
    const text = readFileSync(join(dir, "SHA256SUMS"), "utf8");
    expect(text.split("\n")[1]).toBe(`${nodeSha(new TextEncoder().encode('{"lr": 0.001}\n'))}  config.json`);
    expect((await verifyManifest(dir)).ok).toBe(true);

    const p = join(dir, "checkpoints/step-1/adapter_model.safetensors");
    const bytes = readFileSync(p);
    bytes[500] ^= 0x01;
    writeFileSync(p, bytes);
    const bad = await verifyManifest(dir);
    expect(bad).toEqual({
      ok: false,
      mismatched: ["checkpoints/step-1/adapter_model.safetensors"],
      missing: [],
      unlisted: [],
    });

    bytes[500] ^= 0x01;
    writeFileSync(p, bytes);
    writeFileSync(join(dir, "extra.txt"), "x");
    expect((await verifyManifest(dir)).ok).toBe(true);
    expect(await verifyManifest(dir, { strict: true })).toMatchObject({ ok: false, unlisted: ["extra.txt"] });
  });

  it("parses binary-mode lines and refuses paths that leave the directory", () => {
    const h = "a".repeat(64);
    expect(parseManifest(`${h} *model.bin\n`)).toEqual([{ sha256: h, path: "model.bin" }]);
    expect(() => parseManifest(`${h}  ../etc/passwd\n`)).toThrow(ManifestError);
    expect(() => parseManifest(`${h}  /abs\n`)).toThrow(/must be relative/);
    expect(() => parseManifest("not a line\n")).toThrow(/line 1/);
    expect(() => serializeManifest([{ path: "a", sha256: "xyz" }])).toThrow(/not a hex SHA-256/);
  });
});
