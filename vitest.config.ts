import { defineConfig } from "vitest/config";

// One vitest run over every package and the cross-package tests in test/.
// "source" resolves @kiln/* to TypeScript sources, so no build is needed first.
export default defineConfig({
  resolve: { conditions: ["source", "module", "import", "default"] },
  ssr: { resolve: { conditions: ["source", "module", "import", "default"] } },
  test: {
    include: ["packages/*/src/**/*.test.ts", "packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
