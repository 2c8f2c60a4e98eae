// `kiln demo | generate | merge | scale | manifest | convert-llama2c`: commands on model and adapter
// directories. Options are declared here; the work is done by the packages and artifacts.ts.
import { join } from "node:path";
import { convertLlama2c, verifyManifest, writeManifest } from "@kiln/hub-io";
import { generate, stories260KPaths } from "@kiln/models";
import { initBackend, setBackend } from "@kiln/tensor";
import { mergeAdapterDirs, scaleAdapterDir } from "../artifacts.js";
import { withDirLocks } from "../dir-lock.js";
import { checkOutputSeparate } from "../output-dir.js";
import { loadLocalModel, parseAdapterSpecs } from "../policies.js";
import { UsageError, defineCommand } from "./args.js";
import { onInterrupt, shellQuote } from "./interrupt.js";

/** Backends a model command can run on; "auto" picks native where a BLAS loads, else wasm. */
export const MODEL_BACKENDS = ["wasm", "native", "webgpu", "gpujs", "js", "auto"] as const;

export async function useBackend(name: string): Promise<void> {
  if (name === "js") setBackend("js");
  else await initBackend(name);
}

/** Run a check whose error is the user's to fix (exit 2). */
function usageCheck(check: () => void): void {
  try {
    check();
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

const backendOption = {
  type: "string",
  choices: MODEL_BACKENDS,
  default: "wasm",
  description: "tensor backend",
} as const;

export const demoCommand = defineCommand({
  name: "demo",
  summary:
    "convert the embedded stories260K model, generate, LoRA SFT, merge (s=0.85, fp32), generate again, play questworld",
  description:
    "Writes a run directory (config, metrics, checkpoints, trajectories, SHA256SUMS) under --out/--name. The most complete pipeline the packages offer on embedded data; about a minute on a laptop.",
  options: {
    out: { type: "string", default: "runs", placeholder: "DIR", description: "parent of the run directory" },
    name: {
      type: "string",
      default: "demo",
      placeholder: "NAME",
      description: "run directory name (one path component)",
    },
    steps: { type: "integer", default: 60, min: 1, description: "LoRA SFT steps" },
    seed: { type: "integer", default: 0, description: "seed of the adapter's init and sampling" },
    backend: { type: "string", choices: ["wasm", "js"], default: "wasm", description: "tensor backend" },
    overwrite: { type: "boolean", description: "replace an existing run directory of that name" },
  },
  examples: ["kiln demo --out runs --name demo --steps 60"],
  run: async ({ values, argv }) => {
    const { runDemo } = await import("../demo.js");
    const { checkRunName } = await import("../run-dir.js");
    try {
      checkRunName(values.name);
    } catch (e) {
      throw new UsageError(`--name: ${(e as Error).message}`);
    }
    const runDir = join(values.out, values.name);
    const again = ["kiln", "demo", ...argv.filter((a) => a !== "--overwrite"), "--overwrite"].map(shellQuote);
    const stopInterrupts = onInterrupt(() => runDir, `${again.join(" ")} (the demo does not resume)`);
    try {
      const r = await withDirLocks([runDir], ["kiln", "demo", ...argv].map(shellQuote).join(" "), () =>
        runDemo({
          out: values.out,
          name: values.name,
          steps: values.steps,
          seed: values.seed,
          backend: values.backend,
          mode: values.overwrite ? "overwrite" : "new",
        }),
      );
      console.log(`run directory: ${r.runDir}`);
    } finally {
      stopInterrupts();
    }
    return 0;
  },
});

export const generateCommand = defineCommand({
  name: "generate",
  summary: "continue a prompt with a model directory (and optional adapters)",
  positionals: [{ name: "model-dir", description: "a Hugging Face model directory" }],
  options: {
    prompt: { type: "string", default: "Once upon a time", description: "the text to continue" },
    "max-tokens": { type: "integer", default: 64, min: 1, description: "new tokens at most" },
    temperature: { type: "number", default: 0, min: 0, description: "0: greedy" },
    seed: { type: "integer", default: 0, description: "sampling seed" },
    adapter: { type: "string", placeholder: "DIR", description: "a PEFT LoRA adapter to attach" },
    backend: backendOption,
  },
  examples: ['kiln generate runs/demo/model --prompt "Once upon a time" --max-tokens 32'],
  run: async ({ positionals: [dir], values }) => {
    await useBackend(values.backend);
    const { model, tokenizer } = await loadLocalModel(dir, values.adapter);
    const [out] = generate(model, [tokenizer.encode(values.prompt, { addSpecialTokens: true })], {
      maxNewTokens: values["max-tokens"],
      temperature: values.temperature,
      seed: values.seed,
      tokenizer,
    });
    console.log(values.prompt + out.text);
    return 0;
  },
});

export const mergeCommand = defineCommand({
  name: "merge",
  summary: "merge PEFT LoRA adapters into a base model: W₀ + Σ sᵢ·ΔWᵢ in fp32, written as a new model directory",
  description:
    "The output is written to a temporary directory beside --out and renamed into place; an --out that is, contains or is inside the base or an adapter is refused.",
  positionals: [{ name: "base-model-dir", description: "the base Hugging Face model directory" }],
  options: {
    adapter: { type: "strings", multiple: true, placeholder: "DIR[,DIR…]", description: "adapters, merged in order" },
    "adapter-scale": {
      type: "string",
      placeholder: "S[,S…]",
      description: "one scale for all adapters or one per adapter (default 1)",
    },
    out: { type: "string", placeholder: "DIR", description: "the merged model directory (required, must not exist)" },
    dtype: { type: "string", choices: ["f32", "bf16"], default: "f32", description: "storage dtype of the weights" },
    overwrite: { type: "boolean", description: "replace an existing non-empty --out (never an input)" },
    backend: backendOption,
  },
  examples: ["kiln merge runs/arp/base --adapter runs/arp/adapter --adapter-scale 0.85 --out merged-model"],
  run: async ({ positionals: [base], values }) => {
    if (!values.out) throw new UsageError("merge needs --out DIR");
    if (values.adapter.length === 0) throw new UsageError("merge needs --adapter DIR[,DIR…]");
    let adapters: ReturnType<typeof parseAdapterSpecs>;
    try {
      adapters = parseAdapterSpecs(values.adapter.join(","), values["adapter-scale"]);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const out = values.out;
    usageCheck(() =>
      checkOutputSeparate(out, [
        { label: "the base model", path: base },
        ...adapters.map((a) => ({ label: "the adapter", path: a.dir })),
      ]),
    );
    const hashes = await withDirLocks([out], `kiln merge ${base} → ${out}`, async () => {
      await useBackend(values.backend);
      return mergeAdapterDirs({ base, adapters, out, dtype: values.dtype, overwrite: values.overwrite });
    });
    console.log(`kiln merge: wrote ${Object.keys(hashes).join(", ")} to ${values.out}`);
    return 0;
  },
});

export const scaleCommand = defineCommand({
  name: "scale",
  summary: "write a copy of a PEFT adapter whose delta is s times the source's (s folded into lora_B)",
  positionals: [{ name: "adapter-dir", description: "a PEFT LoRA adapter directory" }],
  options: {
    scale: { type: "number", placeholder: "S", description: "the factor (required)" },
    out: { type: "string", placeholder: "DIR", description: "the new adapter directory (required)" },
    overwrite: { type: "boolean", description: "replace an existing non-empty --out (never the source)" },
  },
  examples: ["kiln scale runs/arp/adapter --scale 0.5 --out half-adapter"],
  run: async ({ positionals: [source], values }) => {
    if (values.out === undefined) throw new UsageError("scale needs --out DIR");
    if (values.scale === undefined) throw new UsageError("scale needs --scale S");
    const { out, scale, overwrite } = values;
    usageCheck(() => checkOutputSeparate(out, [{ label: "the adapter", path: source }]));
    await withDirLocks([out], `kiln scale ${source} → ${out}`, () =>
      scaleAdapterDir(source, out, scale, { overwrite }),
    );
    console.log(`kiln scale: wrote ${source} × ${values.scale} to ${values.out}`);
    return 0;
  },
});

export const manifestCommand = defineCommand({
  name: "manifest",
  summary: "write or verify a directory's SHA256SUMS (sha256sum -c format)",
  positionals: [
    { name: "action", description: "what to do", choices: ["write", "verify"] },
    { name: "dir", description: "a run, model or adapter directory" },
  ],
  options: {},
  examples: ["kiln manifest verify runs/arp", "kiln manifest write my-model"],
  run: async ({ positionals: [action, dir] }) => {
    if (action === "write") {
      // A run still writing its directory would be hashed half-way: the lock waits for no one, it refuses.
      const entries = await withDirLocks([dir], `kiln manifest write ${dir}`, () => writeManifest(dir));
      console.log(`SHA256SUMS: ${entries.length} files`);
      return 0;
    }
    const report = await withDirLocks([dir], `kiln manifest verify ${dir}`, () => verifyManifest(dir));
    for (const p of report.mismatched) console.log(`${p}: FAILED`);
    for (const p of report.missing) console.log(`${p}: MISSING`);
    console.log(report.ok ? "OK" : "verification failed");
    return report.ok ? 0 : 1;
  },
});

export const convertLlama2cCommand = defineCommand({
  name: "convert-llama2c",
  summary:
    "convert a llama2.c checkpoint (or the stories260K model @kiln/models ships) to a Hugging Face Llama directory",
  positionals: [
    { name: "checkpoint", description: 'a llama2.c checkpoint .bin, or "stories260K" for the shipped model' },
    { name: "tokenizer-or-out", description: "the llama2.c tokenizer.bin (or, with stories260K, the output dir)" },
    { name: "out-dir", description: "the output directory (not with stories260K)", optional: true },
  ],
  options: {},
  examples: ["kiln convert-llama2c stories260K models/stories260K", "kiln convert-llama2c model.bin tokenizer.bin out"],
  run: async ({ positionals }) => {
    const embedded = positionals[0] === "stories260K";
    if (embedded && positionals.length !== 2)
      throw new UsageError("convert-llama2c stories260K takes one more argument: <out-dir>");
    if (!embedded && positionals.length !== 3)
      throw new UsageError("convert-llama2c needs <checkpoint.bin> <tokenizer.bin> <out-dir>");
    const [checkpoint, tokenizer, outDir] = embedded
      ? [stories260KPaths().checkpoint, stories260KPaths().tokenizer, positionals[1]]
      : positionals;
    const c = await convertLlama2c({ checkpoint, tokenizer, outDir });
    console.log(`wrote ${[...c.files.keys()].join(", ")} to ${outDir}`);
    return 0;
  },
});
