// What a recipe ships: the merged model as a Hugging Face directory (config.json, model.safetensors
// in the recipe's dtype, tokenizer files, chat template, generation_config.json, a model card with
// the run's metrics and every file's SHA-256) and adapters beside it. Also the `kiln merge` and
// `kiln scale` operations on directories.
import { mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  makeModelCard,
  readPeftAdapter,
  sha256File,
  toFloat32,
  writeFileAtomic,
  writePeftAdapter,
  writeSafetensorsFile,
} from "@kiln/hub-io";
import { loadAdapter, mergeAdapter } from "@kiln/lora";
import type { ChatTemplate, Model, Tokenizer } from "@kiln/models";
import { loadModel, loadTokenizer } from "@kiln/models";
import { f32ToBf16Bits } from "@kiln/tensor";
import { RecipeError } from "./recipes/errors.js";

export interface MergedModelOptions {
  tokenizer: Tokenizer;
  template?: ChatTemplate;
  /** Storage dtype of the weights (ARP: f32, the seeds' fp32 merge). */
  dtype?: "f32" | "bf16";
  /** Where the base model came from (a path, a hub id, or "random tiny Qwen3"). */
  baseModel: string;
  /** Title line of the model card. */
  title: string;
  /** Markdown sections after the title (phase tables, hyperparameters). */
  body?: string;
  tags?: string[];
}

function bf16Bytes(values: Float32Array): Uint8Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = f32ToBf16Bits(values[i]);
  return new Uint8Array(out.buffer);
}

/** SHA-256 of every file directly in `dir`, by name. */
export async function directoryHashes(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir).sort())
    if (statSync(join(dir, name)).isFile()) out[name] = await sha256File(join(dir, name));
  return out;
}

/** Write `model` (with whatever it has merged) as a Hugging Face directory that `loadModel` and transformers read. */
export async function writeMergedModel(
  dir: string,
  model: Model,
  options: MergedModelOptions,
): Promise<Record<string, string>> {
  mkdirSync(dir, { recursive: true });
  const dtype = options.dtype ?? "f32";
  for (const [, lin] of model.namedLinears())
    if (lin.adapters.some((a) => a.enabled))
      throw new RecipeError("writeMergedModel: the model still has an active adapter; merge or detach it first");
  const tensors: Record<string, { dtype: "F32" | "BF16"; shape: number[]; data: Uint8Array }> = {};
  for (const [name, t] of model.namedParameters()) {
    const values = t.toFloat32Array();
    tensors[name] =
      dtype === "f32"
        ? {
            dtype: "F32",
            shape: [...t.shape],
            data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength),
          }
        : { dtype: "BF16", shape: [...t.shape], data: bf16Bytes(values) };
  }
  await writeSafetensorsFile(join(dir, "model.safetensors"), tensors, { format: "pt" });
  const torchDtype = dtype === "f32" ? "float32" : "bfloat16";
  await writeFileAtomic(
    join(dir, "config.json"),
    `${JSON.stringify({ ...model.config.raw, torch_dtype: torchDtype }, null, 2)}\n`,
  );
  const tok = options.tokenizer;
  await writeFileAtomic(join(dir, "tokenizer.json"), JSON.stringify(tok.tokenizerJson));
  const templateSource = options.template?.source ?? tok.chatTemplate ?? undefined;
  await writeFileAtomic(
    join(dir, "tokenizer_config.json"),
    `${JSON.stringify({ ...tok.tokenizerConfig, ...(templateSource ? { chat_template: templateSource } : {}) }, null, 2)}\n`,
  );
  if (templateSource) await writeFileAtomic(join(dir, "chat_template.jinja"), templateSource);
  await writeFileAtomic(
    join(dir, "generation_config.json"),
    `${JSON.stringify(
      {
        bos_token_id: tok.bosTokenId ?? undefined,
        eos_token_id: tok.eosTokenId ?? undefined,
        pad_token_id: tok.padTokenId ?? undefined,
        do_sample: false,
      },
      null,
      2,
    )}\n`,
  );
  const hashes = await directoryHashes(dir);
  delete hashes["README.md"];
  const table = Object.entries(hashes)
    .map(([n, h]) => `| ${n} | \`${h}\` |`)
    .join("\n");
  const card = makeModelCard(
    { base_model: options.baseModel, library_name: "kiln", tags: ["kiln", ...(options.tags ?? [])] },
    `# ${options.title}\n\nWeights stored as ${torchDtype}; base model: ${options.baseModel}.\n\n${options.body ?? ""}\n\n## Files\n\n| file | SHA-256 |\n|---|---|\n${table}\n`,
  );
  await writeFileAtomic(join(dir, "README.md"), card);
  return hashes;
}

/** `kiln scale`: a PEFT adapter whose delta is s times the source's (s folded into lora_B). */
export async function scaleAdapterDir(source: string, out: string, scale: number): Promise<void> {
  if (!Number.isFinite(scale)) throw new RecipeError(`scale must be a finite number, got ${scale}`);
  const peft = await readPeftAdapter(source);
  const layers = new Map(
    [...peft.layers].map(([module, l]) => {
      const b = Float32Array.from(toFloat32(l.B), (v) => v * scale);
      const a = toFloat32(l.A);
      return [
        module,
        {
          A: {
            dtype: "F32" as const,
            shape: [...l.A.shape],
            data: new Uint8Array(a.buffer, a.byteOffset, a.byteLength),
          },
          B: { dtype: "F32" as const, shape: [...l.B.shape], data: new Uint8Array(b.buffer) },
        },
      ];
    }),
  );
  await writePeftAdapter(out, { config: peft.config, layers });
}

/**
 * `kiln merge`: load a base directory, merge adapters in order (each `{dir, scale}`) in f32, write
 * the result as a Hugging Face directory in `dtype`.
 */
export async function mergeAdapterDirs(options: {
  base: string;
  adapters: { dir: string; scale: number }[];
  out: string;
  dtype?: "f32" | "bf16";
}): Promise<Record<string, string>> {
  if (options.adapters.length === 0) throw new RecipeError("merge: give at least one adapter");
  const model = await loadModel(options.base, { dtype: "f32" });
  const tokenizer = await loadTokenizer(options.base);
  for (const [i, a] of options.adapters.entries()) {
    const adapter = await loadAdapter(model, a.dir, { name: `merge-${i}` });
    mergeAdapter(adapter, { scale: a.scale, dtype: "f32", keepOriginal: false });
  }
  return writeMergedModel(options.out, model, {
    tokenizer,
    dtype: options.dtype ?? "f32",
    baseModel: options.base,
    title: `${options.base} merged with ${options.adapters.map((a) => `${a.dir} (×${a.scale})`).join(", ")}`,
  });
}
