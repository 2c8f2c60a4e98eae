// Atomic writes are durable: the file is fsynced before the rename and its directory after it.
import { open } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { readFileText, writeFileAtomic } from "../src/index.js";
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
