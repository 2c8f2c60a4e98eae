// Turn a CLI policy spec into a Policy: an OpenAI-compatible URL (vLLM, SGLang,
// llama.cpp, kiln serve) or a local Hugging Face model directory (+ optional adapter).
import { readFile } from "node:fs/promises";
import { statSync } from "node:fs";
import { loadAdapter } from "@kiln/lora";
import { ChatTemplate, LocalPolicy, type Model, type Tokenizer, loadModel, loadTokenizer } from "@kiln/models";
import { HttpPolicy, type Policy } from "@kiln/rollout";
import { chatmlTemplate } from "./recipes/tiny-chat.js";

export interface PolicySpecOptions {
  /** Model name sent to an HTTP server (default "default"). */
  model?: string;
  /** PEFT adapter directory for a local model. */
  adapter?: string;
  maxTokens?: number;
  /** `--chat-template`: "chatml" or a Jinja file; default the model's own template. */
  chatTemplate?: string;
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
  const chatTemplate = await chatTemplateFor(spec, tokenizer, options.chatTemplate);
  return new LocalPolicy({
    model,
    tokenizer,
    chatTemplate,
    id: `local:${spec}`,
    defaults: { maxTokens: options.maxTokens ?? 256 },
  });
}

/**
 * The chat template a local model is served or evaluated with: `--chat-template chatml` (ChatML with Hermes tool
 * calls), `--chat-template FILE.jinja`, else the model's own. A base model without one (e.g. stories260K) is
 * refused with the option to use, instead of failing at the first request.
 */
export async function chatTemplateFor(dir: string, tokenizer: Tokenizer, flag?: string): Promise<ChatTemplate> {
  if (flag === "chatml") return chatmlTemplate();
  const specialTokens = { bos_token: tokenizer.bosToken, eos_token: tokenizer.eosToken, pad_token: tokenizer.padToken };
  if (flag !== undefined) {
    let source: string;
    try {
      source = await readFile(flag, "utf8");
    } catch (e) {
      throw new PolicySpecError(
        `--chat-template ${flag}: not "chatml" and not a readable file (${(e as Error).message})`,
      );
    }
    return new ChatTemplate(source, specialTokens);
  }
  if (tokenizer.chatTemplate === null)
    throw new PolicySpecError(
      `${dir} has no chat template (tokenizer_config.json chat_template or chat_template.jinja): ` +
        `pass --chat-template chatml or --chat-template FILE.jinja`,
    );
  return ChatTemplate.fromTokenizer(tokenizer);
}
