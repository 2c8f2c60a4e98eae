// Atomic writes are durable: the file is fsynced before the rename and its directory after it.
import { open } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { readFileText, writeFileAtomic, writeFileAtomicSync } from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);

describe("writeFileAtomic", () => {
  it("fsyncs the file and then its directory", async () => {
    // FileHandle is not exported; its prototype is reachable from any open handle.
    const probe = await open(join(tmp.dir, "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { sync(): Promise<void> };
    await probe.close();
    const synced: string[] = [];
    const spy = vi.spyOn(proto, "sync").mockImplementation(async function (this: { fd: number }) {
      synced.push(String(this.fd));
    });
    try {
      await writeFileAtomic(join(tmp.dir, "sub", "model.json"), '{"a":1}');
    } finally {
      spy.mockRestore();
    }
    expect(synced.length).toBeGreaterThanOrEqual(2);
    expect(await readFileText(join(tmp.dir, "sub", "model.json"))).toBe('{"a":1}');
  });
});

describe("writeFileAtomicSync", () => {
  it("fsyncs the file and its directory, renames into place, and leaves no temp file on failure", async () => {
    const fs = await import("node:fs");
    const synced: number[] = [];
    const syncFs = { ...fs, fsyncSync: (fd: number) => void synced.push(fd) };
    const path = join(tmp.dir, "sync", "results.json");
    writeFileAtomicSync(syncFs, path, "[1]\n");
    expect(fs.readFileSync(path, "utf8")).toBe("[1]\n");
    expect(synced.length).toBe(2); // the file, then the directory
    const failing = {
      ...fs,
      renameSync: () => {
        throw new Error("disk full");
      },
    };
    expect(() => writeFileAtomicSync(failing, path, "[2]\n")).toThrow("disk full");
    expect(fs.readFileSync(path, "utf8")).toBe("[1]\n");
    expect(fs.readdirSync(join(tmp.dir, "sync"))).toEqual(["results.json"]);
  });
});
