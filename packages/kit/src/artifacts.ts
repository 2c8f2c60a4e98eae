// What a recipe ships: the merged model as a Hugging Face directory (config.json, model.safetensors
// in the recipe's dtype, tokenizer files, chat template, generation_config.json) and PEFT adapters
// beside it, each with a README.md model card as the Hub and PEFT write them (YAML front matter:
// base_model, library_name, tags), saying the base, the recipe, the code and data revisions, the
// run's metrics and every file's SHA-256. Also the `kiln merge` and `kiln scale` operations on
// directories.
import { mkdirSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  ADAPTER_CONFIG_FILE,
  type LoraAdapterConfig,
  makeModelCard,
  readPeftAdapter,
  sha256File,
  toFloat32,
  writeFileAtomic,
  writePeftAdapter,
  writeSafetensorsFile,
} from "@kiln/hub-io";
import { type LoraAdapter, loadAdapter, mergeAdapter, toPeftAdapter } from "@kiln/lora";
import type { ChatTemplate, Model, Tokenizer } from "@kiln/models";
import { loadModel, loadTokenizer } from "@kiln/models";
import { f32ToBf16Bits } from "@kiln/tensor";
import { checkOutputSeparate, writeDirAtomic } from "./output-dir.js";
import { RecipeError } from "./errors.js";
import type { RunMetadata } from "./run-dir.js";

/**
 * The base model's identity as PEFT's `base_model_name_or_path` and a card's `base_model` take it: a
 * Hub repo id or the directory it was loaded from. A description of an in-memory model (it contains
 * spaces: "kiln tinyChat (random …)") is no identity: null, and the card says it in words.
 */
export function baseModelId(source: string | undefined): string | null {
  if (!source || /\s/.test(source)) return null;
  return source;
}

/** What a model card says about where weights came from, beside its title and sections. */
export interface CardProvenance {
  /** Where the base model came from: a Hub id, a directory, or a description of an in-memory model. */
  baseModel: string;
  /** The recipe and step that made the weights, e.g. "ARP (SFT → turn-DPO ×2 → branch-DPO → merge)". */
  recipe?: string;
  /** The run's metadata.json: code revision, data files' SHA-256s, seeds, base model files. */
  run?: RunMetadata;
}

function provenanceSection(p: CardProvenance): string {
  const lines = [`- Base model: ${baseModelId(p.baseModel) ? `\`${p.baseModel}\`` : p.baseModel}`];
  const baseFiles = Object.entries(p.run?.baseModel?.files ?? {}).filter(([n]) => /\.(safetensors|bin|gguf)$/.test(n));
  for (const [n, h] of baseFiles) lines.push(`  - ${n}: \`${h}\``);
  if (p.recipe) lines.push(`- Recipe: ${p.recipe}`);
  if (p.run) {
    const r = p.run;
    const code = r.codeSha
      ? `\`${r.codeSha}\`${r.dirtyTree ? " (with uncommitted changes)" : ""}`
      : "not a git checkout";
    lines.push(`- Code revision: ${code}; @kiln/kit ${r.packages["@kiln/kit"] ?? "unknown"}`);
    if (Object.keys(r.seeds).length)
      lines.push(
        `- Seeds: ${Object.entries(r.seeds)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ")}`,
      );
    const data = Object.entries(r.datasets);
    lines.push(
      data.length ? "- Data revision (SHA-256 of each file the run trained or evaluated on):" : "- Data: none recorded",
    );
    for (const [n, h] of data) lines.push(`  - ${n}: \`${h}\``);
  }
  return `## Provenance\n\n${lines.join("\n")}\n`;
}

function filesSection(hashes: Record<string, string>): string {
  const rows = Object.entries(hashes).map(([n, h]) => `| ${n} | \`${h}\` |`);
  return `## Files\n\n| file | SHA-256 |\n|---|---|\n${rows.join("\n")}\n`;
}

export interface AdapterCardOptions extends CardProvenance {
  title: string;
  /** Markdown sections after the provenance (evaluation tables, hyperparameters). */
  body?: string;
  tags?: string[];
}

/**
 * Write `adapter` as a PEFT directory (adapter_config.json with `base_model_name_or_path` set to the
 * base's identity, adapter_model.safetensors) and its README.md model card, as PEFT's save_pretrained
 * writes one (library_name: peft, tags base_model:adapter:<base>, lora), with the weights' SHA-256s.
 */
export async function writeAdapterDir(
  adapter: LoraAdapter,
  dir: string,
  card: AdapterCardOptions,
): Promise<Record<string, string>> {
  const peft = toPeftAdapter(adapter);
  const id = baseModelId(card.baseModel);
  await writePeftAdapter(dir, { config: { ...peft.config, base_model_name_or_path: id }, layers: peft.layers });
  return writeAdapterCard(dir, card);
}

/**
 * (Re)write the README.md model card of the PEFT adapter directory `dir` (e.g. once the evaluation
 * its body reports is known); returns the SHA-256 of its other files, which the card lists.
 */
export async function writeAdapterCard(dir: string, card: AdapterCardOptions): Promise<Record<string, string>> {
  const config = JSON.parse(readFileSync(join(dir, ADAPTER_CONFIG_FILE), "utf8")) as LoraAdapterConfig;
  const hashes = await directoryHashes(dir);
  delete hashes["README.md"];
  const [r, alpha] = [config.r, config.lora_alpha];
  const id = baseModelId(card.baseModel);
  const text = makeModelCard(
    {
      base_model: id ?? undefined,
      library_name: "peft",
      pipeline_tag: "text-generation",
      tags: [...(id ? [`base_model:adapter:${id}`] : []), "lora", "kiln", ...(card.tags ?? [])],
    },
    `# ${card.title}\n\nA LoRA adapter (r = ${r}, alpha = ${alpha}) in PEFT's format: \`PeftModel.from_pretrained(base, "<this directory>")\` or \`kiln serve --adapter\`.\n\n${provenanceSection(card)}\n${card.body ? `${card.body.trim()}\n\n` : ""}${filesSection(hashes)}`,
  );
  await writeFileAtomic(join(dir, "README.md"), text);
  return hashes;
}

export interface MergedModelOptions extends CardProvenance {
  tokenizer: Tokenizer;
  template?: ChatTemplate;
  /** Storage dtype of the weights (ARP: f32, the seeds' fp32 merge). */
  dtype?: "f32" | "bf16";
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
  const id = baseModelId(options.baseModel);
  const card = makeModelCard(
    {
      base_model: id ?? undefined,
      library_name: "transformers",
      pipeline_tag: "text-generation",
      tags: ["kiln", ...(options.tags ?? [])],
    },
    `# ${options.title}\n\nWeights stored as ${torchDtype} (\`AutoModelForCausalLM.from_pretrained("<this directory>")\`, \`kiln serve\`).\n\n${provenanceSection(options)}\n${options.body ? `${options.body.trim()}\n\n` : ""}${filesSection(hashes)}`,
  );
  await writeFileAtomic(join(dir, "README.md"), card);
  return hashes;
}

/** `kiln scale`: a PEFT adapter whose delta is s times the source's (s folded into lora_B). */
export async function scaleAdapterDir(
  source: string,
  out: string,
  scale: number,
  options: { overwrite?: boolean } = {},
): Promise<void> {
  if (!Number.isFinite(scale)) throw new RecipeError(`scale must be a finite number, got ${scale}`);
  checkOutputSeparate(out, [{ label: "the adapter", path: source }]);
  const peft = await readPeftAdapter(source);
  if (peft.other.size > 0)
    throw new RecipeError(
      `kiln scale: ${source} also saves ${[...peft.other.keys()].join(", ")} (modules_to_save copies or biases), which replace base tensors rather than add a delta, so they cannot be scaled`,
    );
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
  await writeDirAtomic(
    out,
    { inputs: [{ label: "the adapter", path: source }], overwrite: options.overwrite },
    async (tmp) => {
      await writePeftAdapter(tmp, { config: peft.config, layers });
      const base = peft.config.base_model_name_or_path;
      await writeAdapterCard(tmp, {
        baseModel: base ?? "not recorded in the source adapter's adapter_config.json",
        recipe: `\`kiln scale\`: the adapter ${source} with its delta multiplied by ${scale} (folded into lora_B)`,
        title: `${source} scaled by ${scale}`,
        tags: ["scaled"],
      });
    },
  );
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
  /** Replace an existing non-empty `out` (never one of the inputs). */
  overwrite?: boolean;
}): Promise<Record<string, string>> {
  if (options.adapters.length === 0) throw new RecipeError("merge: give at least one adapter");
  const inputs = [
    { label: "the base model", path: options.base },
    ...options.adapters.map((a) => ({ label: "the adapter", path: a.dir })),
  ];
  checkOutputSeparate(options.out, inputs);
  const model = await loadModel(options.base, { dtype: "f32" });
  const tokenizer = await loadTokenizer(options.base);
  for (const [i, a] of options.adapters.entries()) {
    const adapter = await loadAdapter(model, a.dir, { name: `merge-${i}` });
    mergeAdapter(adapter, { scale: a.scale, dtype: "f32", keepOriginal: false });
  }
  return writeDirAtomic(options.out, { inputs, overwrite: options.overwrite }, (tmp) =>
    writeMergedModel(tmp, model, {
      tokenizer,
      dtype: options.dtype ?? "f32",
      baseModel: options.base,
      recipe: `\`kiln merge\` in f32: W = W₀ + ${options.adapters.map((a) => `${a.scale}·ΔW(${a.dir})`).join(" + ")}`,
      title: `${options.base} merged with ${options.adapters.map((a) => `${a.dir} (×${a.scale})`).join(", ")}`,
      tags: ["lora-merged"],
    }),
  );
}
