import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../src/cli.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);
const fx = (n: string) => new URL(`../../models/data/stories260K/${n}`, import.meta.url).pathname;

function capture() {
  const lines: string[] = [];
  return { lines, write: (s: string) => lines.push(s) };
}

describe("kiln-hub-io CLI", () => {
  it("converts stories260K, inspects the weights, writes and verifies a manifest", async () => {
    const dir = join(tmp.dir, "s260k");
    const o = capture();
    expect(await runCli(["convert-llama2c", fx("stories260K.bin"), fx("tok512.bin"), dir], o.write, o.write)).toBe(0);
    expect(readdirSync(dir)).toContain("tokenizer.json");
    const ins = capture();
    expect(await runCli(["inspect", join(dir, "model.safetensors")], ins.write)).toBe(0);
    expect(ins.lines.join("")).toContain("model.embed_tokens.weight\tF32\t[512, 64]");
    expect(await runCli(["manifest", "write", dir], o.write)).toBe(0);
    const v = capture();
    expect(await runCli(["manifest", "verify", dir], v.write)).toBe(0);
    expect(v.lines.at(-1)).toBe("OK\n");
    const e = capture();
    expect(await runCli(["nope"], e.write, e.write)).toBe(2);
    const h = capture();
    expect(await runCli(["manifest", "--help"], h.write, h.write)).toBe(0);
    expect(h.lines.join("")).toBe("usage:\n  kiln-hub-io manifest write|verify <dir>\n");
    // No command at all: the usage is the error, on stderr, exit 2 (the bin's users see it in a pipe).
    const so = capture();
    const se = capture();
    expect(await runCli([], so.write, se.write)).toBe(2);
    expect(so.lines).toEqual([]);
    expect(se.lines.join("")).toMatch(/^usage:\n {2}kiln-hub-io convert-llama2c/);
    const u = capture();
    expect(await runCli(["manifest", "write", dir, "--force"], u.write, u.write)).toBe(2);
    expect(u.lines.join("")).toContain("unknown option --force");
    expect(await runCli(["inspect", join(dir, "missing.safetensors")], e.write, e.write)).toBe(1);
  });
});

describe("browser safety", () => {
  it("no source file statically imports node:* or @huggingface/hub (they are loaded lazily)", () => {
    const src = new URL("../src/", import.meta.url).pathname;
    for (const f of readdirSync(src).filter((n) => n.endsWith(".ts"))) {
      const text = readFileSync(join(src, f), "utf8");
      expect(text, f).not.toMatch(/^import[^;]*from\s+"(node:[^"]+|@huggingface\/hub)"/m);
      expect(text, f).not.toMatch(/^import\s+"node:/m);
    }
  });
});
