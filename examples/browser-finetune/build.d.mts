// Types for build.mjs (the example's browser test imports it).
export function buildExample(outdir?: string): Promise<{ outdir: string; bundleBytes: number; modelFiles: string[] }>;
