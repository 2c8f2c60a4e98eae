// `kiln export gguf` and `kiln convert gguf` as library functions: a model or PEFT adapter directory
// → a GGUF file llama.cpp loads, and a GGUF model → a Hugging Face directory kiln trains. The bytes are
// @kiln/hub-io's (exportModelToGguf, exportAdapterToGguf, convertGgufToHf); this module adds what a
// command owes its user: an output is never one of its inputs, nor inside one, and an existing output
// is replaced only when asked (the file or directory is written under a temporary name and renamed).
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  ADAPTER_CONFIG_FILE,
  GGUF_EXPORT_DTYPES,
  type GgufExportDtype,
  type GgufExportReport,
  convertGgufToHf,
  exportAdapterToGguf,
  exportModelToGguf,
} from "@kiln/hub-io";
import { OutputDirError, checkOutputSeparate, writeDirAtomic } from "./output-dir.js";

export interface ExportGgufOptions {
  /** A Hugging Face model directory, or a PEFT LoRA adapter directory (adapter_config.json). */
  input: string;
  /** The .gguf file to write. */
  out: string;
  /** Matrices' storage (default f32); vectors stay f32. */
  dtype?: GgufExportDtype;
  /** An adapter's base model directory (default: adapter_config.json's base_model_name_or_path). */
  base?: string;
  /** Replace an existing `out` (never an input). */
  overwrite?: boolean;
}

/** Write `input` (model or adapter) as a GGUF file; returns what was written and any behaviour notes. */
export async function exportGguf(options: ExportGgufOptions): Promise<GgufExportReport> {
  const { input, out } = options;
  const dtype = options.dtype ?? "f32";
  if (!GGUF_EXPORT_DTYPES.includes(dtype))
    throw new OutputDirError(`--dtype ${dtype} is not one of ${GGUF_EXPORT_DTYPES.join(", ")}`);
  if (!existsSync(input) || !statSync(input).isDirectory())
    throw new OutputDirError(`${input} is not a directory (a model or a PEFT adapter directory)`);
  const inputs = [
    { label: "the input", path: input },
    ...(options.base ? [{ label: "the base model", path: options.base }] : []),
  ];
  checkOutputSeparate(out, inputs);
  if (existsSync(out)) {
    if (statSync(out).isDirectory()) throw new OutputDirError(`--out ${out} is a directory, not a .gguf file`);
    if (!options.overwrite) throw new OutputDirError(`${out} already exists: choose a new path or pass --overwrite`);
  }
  const isAdapter = existsSync(join(input, ADAPTER_CONFIG_FILE));
  return isAdapter
    ? exportAdapterToGguf(input, out, { dtype, baseDir: options.base })
    : exportModelToGguf(input, out, { dtype });
}

export interface ConvertGgufOptions {
  /** A GGUF model file. */
  input: string;
  /** The Hugging Face directory to write. */
  out: string;
  /** Matrices' storage in model.safetensors (default f32; bf16 keeps BF16 tensors' bits). */
  dtype?: "f32" | "bf16";
  overwrite?: boolean;
}

/** A GGUF model → a Hugging Face directory (config, tokenizer, chat template, model.safetensors). */
export async function convertGguf(
  options: ConvertGgufOptions,
): Promise<{ tensors: number; architecture: string; notes: string[] }> {
  const { input, out } = options;
  if (!existsSync(input) || !statSync(input).isFile())
    throw new OutputDirError(`${input} is not a file (a .gguf model)`);
  return writeDirAtomic(
    out,
    { inputs: [{ label: "the GGUF file", path: input }], overwrite: options.overwrite },
    async (tmp) => {
      const r = await convertGgufToHf(input, tmp, { dtype: options.dtype ?? "f32" });
      return { tensors: r.tensors, architecture: String((r.config.architectures as string[])[0]), notes: r.notes };
    },
  );
}
