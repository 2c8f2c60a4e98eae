// Shared by the browser suites: find Chromium, or say in one line why the suite does not run. The setup
// (tooling/scripts/up.mjs) sets KILN_BROWSER=required where it installed Chromium; then a missing browser
// fails the suite instead of skipping it.
import { it } from "vitest";
import { type BrowserProbe, CHROMIUM_INSTALL, findBrowser } from "../../tooling/scripts/browser-kit.mjs";

export const browserRequired = process.env.KILN_BROWSER === "required";

export type ReadyBrowser = Extract<BrowserProbe, { ok: true }>;

/**
 * The browser when present. Otherwise, when not required: registers one skipped test whose name says
 * the suite did not run and how to install what is missing, warns the same line, and returns null.
 * When required, returns a probe whose use throws, so every test of the suite fails with the reason.
 */
export function browserOrSkip(suite: string): ReadyBrowser | null {
  const probe = findBrowser();
  if (probe.ok) return probe;
  const line = `${suite} NOT RUN: ${probe.why}; install: ${CHROMIUM_INSTALL}`;
  if (browserRequired) {
    it(`${suite}: KILN_BROWSER=required but the browser is missing`, () => {
      throw new Error(line);
    });
    return null;
  }
  console.warn(line);
  it.skip(line, () => {});
  return null;
}
