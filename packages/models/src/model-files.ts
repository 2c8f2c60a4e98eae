// Where a model's files come from: a local directory (Node) or an in-memory map of
// repo-relative names → contents (browsers, tests, a freshly converted llama2.c model).
import { planGgufToHf } from "@kiln/hub-io";
import { ModelFileError } from "./errors.js";

/** Repo-relative file name → bytes or text (the shape of hub-io's RepoFileMap). */
export type ModelFileMap = ReadonlyMap<string, Uint8Array | string>;

export type ModelSource = string | ModelFileMap;

/** Reads files of a model directory or file map; `null` when the file does not exist. */
export interface ModelFiles {
  readonly label: string;
  bytes(name: string): Promise<Uint8Array | null>;
  text(name: string): Promise<string | null>;
  /** A local path for lazy reading, when the source is a directory. */
  path(name: string): Promise<string | null>;
}

export function modelFiles(source: ModelSource): ModelFiles {
  if (typeof source !== "string") {
    const get = (name: string) => source.get(name) ?? null;
    return {
      label: "<in-memory files>",
      bytes: async (name) => {
        const v = get(name);
        return v === null ? null : typeof v === "string" ? new TextEncoder().encode(v) : v;
      },
      text: async (name) => {
        const v = get(name);
        return v === null ? null : typeof v === "string" ? v : new TextDecoder().decode(v);
      },
      path: async () => null,
    };
  }
  const dir = source;
  const resolve = async (name: string): Promise<string | null> => {
    const { join } = await import("node:path");
    const { stat } = await import("node:fs/promises");
    const p = join(dir, name);
    try {
      return (await stat(p)).isFile() ? p : null;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw e;
    }
  };
  return {
    label: dir,
    path: resolve,
    bytes: async (name) => {
      const p = await resolve(name);
      if (p === null) return null;
      const { readFile } = await import("node:fs/promises");
      const b = await readFile(p);
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    },
    text: async (name) => {
      const p = await resolve(name);
      if (p === null) return null;
      const { readFile } = await import("node:fs/promises");
      return readFile(p, "utf8");
    },
  };
}

/** Parse a JSON object file; null when absent. */
export async function readJsonFile(files: ModelFiles, name: string): Promise<Record<string, unknown> | null> {
  const text = await files.text(name);
  if (text === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ModelFileError(`${files.label}/${name}: not valid JSON (${(e as Error).message})`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v))
    throw new ModelFileError(`${files.label}/${name}: must be a JSON object`);
  return v as Record<string, unknown>;
}

/** A path to a GGUF file (loaded through hub-io's GGUF → Hugging Face conversion). */
export function isGgufPath(source: ModelSource): source is string {
  return typeof source === "string" && /\.gguf$/i.test(source);
}

/** config.json and the tokenizer files of a GGUF, without reading its weights. */
export async function ggufConfigFiles(path: string): Promise<{ config: Record<string, unknown>; files: ModelFileMap }> {
  const plan = await planGgufToHf(path);
  await plan.file.close();
  return { config: plan.config, files: plan.files };
}
