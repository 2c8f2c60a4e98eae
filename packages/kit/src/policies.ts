// Turn a CLI policy spec into a Policy: an OpenAI-compatible URL (vLLM, SGLang,
// llama.cpp, kiln serve) or a local Hugging Face model directory (+ optional adapter).
import { readFile } from "node:fs/promises";
import { statSync } from "node:fs";
import { loadAdapter } from "@kiln/lora";
import {
  ChatTemplate,
  LocalPolicy,
  type Model,
  type Tokenizer,
  chatmlTemplate,
  loadModel,
  loadTokenizer,
} from "@kiln/models";
import { HttpPolicy, type Policy } from "@kiln/rollout";

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

/** An adapter to apply: a PEFT directory and the scale of its delta (1 = as trained). */
export interface AdapterSpec {
  dir: string;
  scale: number;
}

/**
 * `--adapter a,b --adapter-scale 0.85,1`: adapters applied together (their deltas add, so an OPD
 * chain r1,r2 on the base equals the merged round 2), each at its scale (one scale = all).
 */
export function parseAdapterSpecs(adapters: string | undefined, scales: string | undefined): AdapterSpec[] {
  if (!adapters) {
    if (scales) throw new PolicySpecError("--adapter-scale needs --adapter");
    return [];
  }
  const dirs = adapters.split(",").filter(Boolean);
  const values = (scales ?? "1").split(",").map((s) => Number(s));
  if (values.some((v) => !Number.isFinite(v)) || (values.length !== 1 && values.length !== dirs.length))
    throw new PolicySpecError(
      `--adapter-scale must be one number or one per adapter (${dirs.length}), got "${scales}"`,
    );
  return dirs.map((dir, i) => ({ dir, scale: values.length === 1 ? values[0] : values[i] }));
}

/** A local Hugging Face model directory with its tokenizer, optionally with PEFT adapters attached (scaled). */
export async function loadLocalModel(
  dir: string,
  adapter?: string | readonly AdapterSpec[],
): Promise<{ model: Model; tokenizer: Tokenizer }> {
  const model = await loadModel(dir);
  const tokenizer = await loadTokenizer(dir);
  const specs = typeof adapter === "string" ? [{ dir: adapter, scale: 1 }] : (adapter ?? []);
  for (const [i, spec] of specs.entries()) {
    const a = await loadAdapter(model, spec.dir, { name: `adapter-${i}` });
    if (spec.scale !== 1) a.setScale(spec.scale);
  }
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
