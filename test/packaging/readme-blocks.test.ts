// The README check's parser (tooling/scripts/readme-blocks.mjs), and every README of the repository through it:
// a fence without a language, an unclosed fence or a skip without a reason fails here before the slower pack test.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { readmeBlocks } from "../../tooling/scripts/readme-blocks.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

function readmes(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === "node_modules" || name === "dist" || name.startsWith(".")) return [];
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return readmes(p);
    return name === "README.md" ? [p] : [];
  });
}

describe("README code blocks", () => {
  it("classifies blocks: ts/js/sh run, text does not, a skip marker carries its reason", () => {
    const md = [
      "<!-- readme-check: install @kiln/models @kiln/kit -->",
      "```ts",
      "const a = 1;",
      "```",
      "",
      "<!-- readme-check: skip: needs a server on :8000 -->",
      "",
      "```sh",
      "curl 127.0.0.1:8000",
      "```",
      "```text",
      "usage: x",
      "```",
      "```bash",
      "echo ok",
      "```",
    ].join("\n");
    const { blocks, install } = readmeBlocks(md, "t.md");
    expect(install).toEqual(["@kiln/models", "@kiln/kit"]);
    expect(blocks.map((b) => [b.kind, b.skip, b.line])).toEqual([
      ["ts", null, 2],
      ["sh", "needs a server on :8000", 8],
      [null, null, 11],
      ["sh", null, 14],
    ]);
    expect(blocks[0].code).toBe("const a = 1;");
  });

  it("refuses a fence without a language, an unclosed fence and a skip without a reason", () => {
    expect(() => readmeBlocks("```\nx\n```", "a.md")).toThrow(/a\.md:1: code block without a language/);
    expect(() => readmeBlocks("```ts\nx\n", "b.md")).toThrow(/b\.md:1: code fence is never closed/);
    expect(() => readmeBlocks("<!-- readme-check: skip: -->\n```ts\nx\n```", "c.md")).toThrow(/needs a reason/);
  });

  it("every README of the repository parses, and packages have a runnable example", () => {
    const files = readmes(root);
    expect(files.length).toBeGreaterThan(8);
    for (const file of files) {
      const label = relative(root, file);
      const { blocks } = readmeBlocks(readFileSync(file, "utf8"), label);
      if (/^packages\/[^/]+\/README\.md$/.test(label)) {
        expect(
          blocks.some((b) => b.kind !== null && b.skip === null),
          `${label} has no runnable block`,
        ).toBe(true);
      }
    }
  });
});
