// The committed kernels.generated.ts must be exactly what scripts/build-wasm.mjs produces now.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain .mjs build script without type declarations
import { GENERATED_PATH, buildKernelsSource } from "../../scripts/build-wasm.mjs";

describe("kernels.generated.ts", () => {
  it("is up to date with the WAT generators (run node packages/tensor/scripts/build-wasm.mjs)", async () => {
    const fresh: string = await buildKernelsSource();
    const committed = readFileSync(GENERATED_PATH as string, "utf8");
    expect(fresh.length).toBeGreaterThan(1000);
    expect(committed === fresh).toBe(true);
  });
});
