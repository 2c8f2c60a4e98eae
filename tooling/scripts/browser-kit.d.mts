// Types for browser-kit.mjs (imported by the TypeScript browser suite in test/browser/). The playwright
// and esbuild shapes are the few members the suite uses, so this file needs neither package's types.

export const repoRoot: string;
export const CHROMIUM_INSTALL: string;

export function workspaceSourceAliases(): Record<string, string>;
export function stories260KDir(): string;

export interface BundleResult {
  errors: { text: string }[];
  warnings: { text: string }[];
  metafile: { inputs: Record<string, unknown>; outputs: Record<string, { bytes: number }> };
  outputFiles?: { path: string; contents: Uint8Array }[];
}

export function loadEsbuild(): { build(options: Record<string, unknown>): Promise<BundleResult> };

export function bundleForBrowser(options: {
  entryPoints?: string[];
  outdir?: string;
  stdin?: { contents: string; resolveDir: string; sourcefile?: string; loader?: "ts" | "js" };
  sourceAliases?: boolean;
  minify?: boolean;
}): Promise<{ result: BundleResult; builtins: string[] }>;

export function serveStatic(
  roots: Record<string, string>,
  options?: { port?: number; host?: string; isolated?: boolean },
): Promise<{ url: string; close(): Promise<void> }>;

export interface BrowserPage {
  goto(url: string): Promise<unknown>;
  on(event: "console" | "pageerror", listener: (arg: { text?(): string; message?: string }) => void): void;
  title(): Promise<string>;
  waitForFunction(fn: string | (() => unknown), arg?: unknown, options?: { timeout?: number }): Promise<unknown>;
  evaluate<R, A>(fn: (arg: A) => R | Promise<R>, arg: A): Promise<R>;
  click(selector: string): Promise<void>;
  selectOption(selector: string, value: string): Promise<unknown>;
  textContent(selector: string): Promise<string | null>;
  screenshot(options: {
    path: string;
    fullPage?: boolean;
    clip?: { x: number; y: number; width: number; height: number };
  }): Promise<unknown>;
  close(): Promise<void>;
}

export interface BrowserContext {
  newPage(): Promise<BrowserPage>;
}

export type BrowserProbe = { ok: true; executablePath: string; playwright: unknown } | { ok: false; why: string };

export function findBrowser(): BrowserProbe;

export function launchChromium(probe: {
  executablePath: string;
  playwright: unknown;
}): Promise<{ context: BrowserContext; close(): Promise<void> }>;

export const BROWSER_PACKAGES: string[];
export function checkBrowserBundles(options?: {
  resolveDir?: string;
  sourceAliases?: boolean;
  log?: (line: string) => void;
}): Promise<void>;
