// The browser-facing packages bundle for the browser (esbuild --platform=browser) with no Node built-in
// in the bundle: Node-only code paths import node:* lazily, and each package's package.json "browser"
// field maps those modules to empty ones. The packaging test (tooling/scripts/pack-test.mjs) checks the
// same on the built, installed packages; this checks the sources on every test run, without a build.
import { describe, expect, it } from "vitest";
import { BROWSER_PACKAGES, checkBrowserBundles } from "../../tooling/scripts/browser-kit.mjs";

describe("browser bundles of the sources", () => {
  it(`${BROWSER_PACKAGES.join(", ")} bundle with esbuild --platform=browser, no Node built-ins`, async () => {
    const lines: string[] = [];
    await checkBrowserBundles({ sourceAliases: true, log: (line) => lines.push(line) });
    expect(lines.length).toBe(BROWSER_PACKAGES.length);
  }, 120_000);

  it("fails on an unmapped Node built-in (the check can fail)", async () => {
    const { bundleForBrowser } = await import("../../tooling/scripts/browser-kit.mjs");
    await expect(
      bundleForBrowser({
        stdin: {
          contents: 'export const f = () => import("node:fs/promises");',
          resolveDir: process.cwd(),
          loader: "js",
        },
      }),
    ).rejects.toThrow(/node:fs\/promises/);
  });
});
