// Code cites the design as `docs/ARCHITECTURE.md §<heading>` and `docs/NUMERICS.md §<number>`. Every citation must
// name a section that exists, and nothing may cite the notes those documents replaced.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const DOCS = ["ARCHITECTURE.md", "NUMERICS.md"] as const;
const SCANNED = /\.(ts|mts|mjs|js|py|md)$/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === "node_modules" || name === "dist" || name.startsWith(".")) return [];
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return files(p);
    return SCANNED.test(name) ? [p] : [];
  });
}

/** The keys a citation may use for each heading: its text without a trailing "(…)", and its number if it has one. */
export function sectionKeys(markdown: string): string[] {
  const keys: string[] = [];
  for (const line of markdown.split("\n")) {
    const m = /^#{2,4} (.+)$/.exec(line);
    if (!m) continue;
    const text = m[1].replace(/\s*\(.*\)\s*$/, "").trim();
    keys.push(text);
    const num = /^(\d+(?:\.\d+)*)\.?\s/.exec(text);
    if (num) keys.push(num[1]);
  }
  return keys;
}

/** Whether the text after "§" starts with one of the keys, ending at a word boundary (§3.2 is not §3.25). */
export function citesSection(after: string, keys: readonly string[]): boolean {
  return keys.some((k) => after.startsWith(k) && !/^[\p{L}\p{N}]|^\.\d/u.test(after.slice(k.length)));
}

const sources = [
  ...["packages", "tooling", "test", "docs", "examples"].flatMap((d) => files(join(root, d))),
  join(root, "README.md"),
  join(root, "CONTRIBUTING.md"),
];

describe("design documents", () => {
  const keys = Object.fromEntries(
    DOCS.map((doc) => [doc, sectionKeys(readFileSync(join(root, "docs", doc), "utf8"))]),
  ) as Record<(typeof DOCS)[number], string[]>;

  it("section keys: names without their parenthesis, and numbers", () => {
    expect(sectionKeys("# Title\n## Run directory (layout)\n### 3.2 DPO\n")).toEqual([
      "Run directory",
      "3.2 DPO",
      "3.2",
    ]);
    expect(citesSection("3.2).", ["3.2"])).toBe(true);
    expect(citesSection("3.25", ["3.2"])).toBe(false);
    expect(citesSection("3.2.1", ["3.2"])).toBe(false);
    expect(citesSection("Floors, and", ["Floors"])).toBe(true);
    expect(citesSection("Floorsy", ["Floors"])).toBe(false);
  });

  it("every docs/ARCHITECTURE.md and docs/NUMERICS.md § citation names an existing section", () => {
    const bad: string[] = [];
    let count = 0;
    for (const file of sources) {
      const text = readFileSync(file, "utf8");
      for (const m of text.matchAll(/(ARCHITECTURE|NUMERICS)\.md §([^\s<][^\n]*)/g)) {
        count++;
        const doc = `${m[1]}.md` as (typeof DOCS)[number];
        if (!citesSection(m[2], keys[doc])) bad.push(`${relative(root, file)}: ${m[0].slice(0, 60)}`);
      }
    }
    expect(bad).toEqual([]);
    expect(count).toBeGreaterThan(40);
  });

  it("no source cites the lowercase notes the docs replaced", () => {
    const stale = sources
      .filter((f) => !f.includes(`${join("test", "fixtures")}`))
      .filter((f) => /\b(architecture|numerics)\.md\b/.test(readFileSync(f, "utf8")))
      .map((f) => relative(root, f));
    expect(stale).toEqual([]);
  });
});
