// Turn a CLI policy spec into a Policy: an OpenAI-compatible URL (vLLM, SGLang,
// llama.cpp, kiln serve) or a local Hugging Face model directory (+ optional adapter).
import { statSync } from "node:fs";
import { loadAdapter } from "@kiln/lora";
import { LocalPolicy, loadModel, loadTokenizer } from "@kiln/models";
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
  const model = await loadModel(spec);
  const tokenizer = await loadTokenizer(spec);
  if (options.adapter) await loadAdapter(model, options.adapter);
  return new LocalPolicy({ model, tokenizer, id: `local:${spec}`, defaults: { maxTokens: options.maxTokens ?? 256 } });
}
