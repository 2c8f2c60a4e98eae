// Shared vitest preset: resolve workspace packages to their TypeScript sources via the
// "source" export condition, so tests run without a prior build.
import { defineConfig } from "vitest/config";

export function kilnVitest(overrides = {}) {
  return defineConfig({
    resolve: { conditions: ["source", "module", "import", "default"] },
    ssr: { resolve: { conditions: ["source", "module", "import", "default"] } },
    test: {
      include: ["src/**/*.test.ts", "test/**/*.test.ts"],
      testTimeout: 120_000,
      hookTimeout: 120_000,
      ...overrides.test,
    },
  });
}
