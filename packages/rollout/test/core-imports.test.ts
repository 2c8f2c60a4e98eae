import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Walks the static import graph of src/core.ts: no module it reaches may import a Node built-in,
// so `@kiln/rollout/core` bundles for browsers.
const src = join(dirname(fileURLToPath(import.meta.url)), "../src");

function imports(file: string): string[] {
  const text = readFileSync(join(src, file), "utf8");
  return [...text.matchAll(/^(?:import|export)[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1]);
}

describe("@kiln/rollout/core", () => {
  it("reaches no Node built-in module", () => {
    const seen = new Set<string>();
    const nodeImports: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const spec of imports(file)) {
        if (spec.startsWith("node:")) nodeImports.push(`${file} -> ${spec}`);
        else if (spec.startsWith("./")) visit(spec.slice(2).replace(/\.js$/, ".ts"));
      }
    };
    visit("core.ts");
    expect(seen.size).toBeGreaterThan(20);
    expect(nodeImports).toEqual([]);
    expect(seen.has("openai-server.ts")).toBe(false);
    expect(seen.has("trajectory-file.ts")).toBe(false);
  });

  it("is a subset of the main entry", async () => {
    const core = await import("../src/core.js");
    const main = await import("../src/index.js");
    for (const key of Object.keys(core)) expect(main).toHaveProperty(key);
    expect(main).toHaveProperty("createOpenAIServer");
    expect(core).not.toHaveProperty("createOpenAIServer");
  });
});
