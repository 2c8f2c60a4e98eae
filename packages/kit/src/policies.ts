// Turn a CLI policy spec into a Policy: an OpenAI-compatible URL (vLLM, SGLang,
// llama.cpp, kiln serve) or a local Hugging Face model directory (+ optional adapter).
import { statSync } from "node:fs";
import { loadAdapter } from "@kiln/lora";
import { LocalPolicy, type Model, type Tokenizer, loadModel, loadTokenizer } from "@kiln/models";
import { HttpPolicy, type Policy } from "@kiln/rollout";

export interface PolicySpecOptions {
  /** Model name sent to an HTTP server (default "default"). */
  model?: string;
  /** PEFT adapter directory for a local model. */
  adapter?: string;
  maxTokens?: number;
}

export class PolicySpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PolicySpecError";
  }
}

/** A local Hugging Face model directory with its tokenizer, optionally with a PEFT adapter attached. */
export async function loadLocalModel(dir: string, adapter?: string): Promise<{ model: Model; tokenizer: Tokenizer }> {
  const model = await loadModel(dir);
  const tokenizer = await loadTokenizer(dir);
  if (adapter) await loadAdapter(model, adapter);
  return { model, tokenizer };
}

export async function resolvePolicy(spec: string, options: PolicySpecOptions = {}): Promise<Policy> {
  if (/^https?:\/\//.test(spec)) {
    return new HttpPolicy({ baseUrls: spec.split(","), model: options.model ?? "default" });
  }
  let isDir = false;
  try {
    isDir = statSync(spec).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) {
    throw new PolicySpecError(
      `policy "${spec}" is neither an http(s) URL of an OpenAI-compatible server nor a model directory`,
    );
  }
  const { model, tokenizer } = await loadLocalModel(spec, options.adapter);
  return new LocalPolicy({ model, tokenizer, id: `local:${spec}`, defaults: { maxTokens: options.maxTokens ?? 256 } });
}
