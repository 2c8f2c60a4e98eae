// `kiln export gguf` and `kiln convert gguf`: options and help; the work is ../gguf-commands.ts.
import { GGUF_EXPORT_DTYPES } from "@kiln/hub-io";
import { withDirLocks } from "../dir-lock.js";
import { convertGguf, exportGguf } from "../gguf-commands.js";
import { OutputDirError } from "../output-dir.js";
import { UsageError, defineCommand } from "./args.js";

async function asUsage<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof OutputDirError) throw new UsageError(e.message);
    throw e;
  }
}

export const exportGgufCommand = defineCommand({
  name: "export gguf",
  summary: "a model or LoRA adapter directory → a GGUF file llama.cpp runs (--lora for adapters)",
  description:
    "Llama, Qwen2 and Qwen3 models: llama.cpp's tensor names and hyperparameters, Llama's q/k rows in Meta's RoPE order, the tokenizer (SentencePiece or byte-level BPE) and the chat template. A PEFT adapter directory becomes a GGUF LoRA (general.type adapter) that llama.cpp applies on the base's GGUF. Vectors are always f32; with q8_0, matrices whose rows are not a multiple of 32 are f16. The file is written under a temporary name and renamed; an output that is or is inside an input is refused.",
  positionals: [
    { name: "model-or-adapter-dir", description: "a Hugging Face model directory or a PEFT LoRA adapter directory" },
    { name: "out.gguf", description: "the GGUF file to write" },
  ],
  options: {
    dtype: { type: "string", choices: GGUF_EXPORT_DTYPES, default: "f32", description: "storage of the matrices" },
    base: {
      type: "string",
      placeholder: "DIR",
      description: "an adapter's base model directory (default: adapter_config.json's base_model_name_or_path)",
    },
    overwrite: { type: "boolean", description: "replace an existing output file (never an input)" },
  },
  examples: [
    "kiln export gguf packages/kit/data/agent-model agent.gguf --dtype q8_0",
    "kiln export gguf runs/arp/adapter adapter.gguf --base packages/kit/data/agent-model",
  ],
  run: async ({ positionals: [input, out], values }) => {
    // Locked like every other output kiln writes: two exports to one file never interleave.
    const r = await withDirLocks([out], `kiln export gguf ${input} → ${out}`, () =>
      asUsage(() => exportGguf({ input, out, dtype: values.dtype, base: values.base, overwrite: values.overwrite })),
    );
    const types = new Map<string, number>();
    for (const t of r.tensors) types.set(t.type, (types.get(t.type) ?? 0) + 1);
    console.log(
      `kiln export gguf: wrote ${r.kind} ${out} (${r.architecture}, ${r.tensors.length} tensors: ${[...types].map(([t, n]) => `${n} ${t}`).join(", ")}; ${r.fileSize} bytes)`,
    );
    for (const note of r.notes) console.log(`  note: ${note}`);
    return 0;
  },
});

export const convertGgufCommand = defineCommand({
  name: "convert gguf",
  summary: "a GGUF model (F32/F16/BF16/Q8_0) → a Hugging Face directory kiln loads and trains",
  description:
    "Writes config.json, generation_config.json, tokenizer.json, tokenizer_config.json, chat_template.jinja and model.safetensors (one tensor in memory at a time) into a temporary directory beside the output and renames it into place. Q8_0 is dequantised; other tensor types are refused naming the type. loadModel also reads a .gguf directly.",
  positionals: [
    { name: "in.gguf", description: "a GGUF model file" },
    { name: "hf-dir", description: "the Hugging Face directory to write" },
  ],
  options: {
    dtype: { type: "string", choices: ["f32", "bf16"], default: "f32", description: "storage of the matrices" },
    overwrite: { type: "boolean", description: "replace an existing non-empty output directory (never the input)" },
  },
  examples: ["kiln convert gguf agent.gguf agent-hf"],
  run: async ({ positionals: [input, out], values }) => {
    const r = await withDirLocks([out], `kiln convert gguf ${input} → ${out}`, () =>
      asUsage(() => convertGguf({ input, out, dtype: values.dtype, overwrite: values.overwrite })),
    );
    console.log(`kiln convert gguf: wrote ${r.architecture} (${r.tensors} tensors) to ${out}`);
    for (const note of r.notes) console.log(`  note: ${note}`);
    return 0;
  },
});
