// Chat templates through @huggingface/jinja, with transformers' rendering environment
// (docs/NUMERICS.md §6: trim_blocks/lstrip_blocks semantics are the template's own `-` markers;
// `tojson` keeps key order, ", "/": " separators and non-ASCII text, raise_exception and
// strftime_now are provided by the library).
import { Template } from "@huggingface/jinja";
import type { Message, ToolSchema } from "@kiln/rollout";
import { ChatTemplateError } from "./errors.js";
import type { Tokenizer } from "./tokenizer.js";

export interface RenderOptions {
  tools?: ToolSchema[];
  /** Append the assistant turn opener (`<|im_start|>assistant\n` …). */
  addGenerationPrompt?: boolean;
  /** Qwen3 switch; left undefined unless given, as transformers does. */
  enableThinking?: boolean;
  /** Extra template variables (passed through as apply_chat_template kwargs). */
  extra?: Record<string, unknown>;
}

/**
 * Messages as the template sees them: OpenAI-shaped plain objects. A null `content` becomes ""
 * (templates do string operations on it, e.g. Qwen3's `'</think>' in message.content`).
 */
function templateMessages(messages: readonly Message[], argumentObjects: boolean): Record<string, unknown>[] {
  return messages.map((m) => {
    const out: Record<string, unknown> = { role: m.role, content: m.content ?? "" };
    if (m.tool_calls)
      out.tool_calls = m.tool_calls.map((c) => ({
        id: c.id,
        type: c.type,
        function: argumentObjects ? { ...c.function, arguments: argumentObject(c.function) } : { ...c.function },
      }));
    if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
    if (m.name !== undefined) out.name = m.name;
    if (m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
    return out;
  });
}

/** A tool call's JSON `arguments` string as the object a transformers user would pass. */
function argumentObject(fn: { name: string; arguments: string }): unknown {
  try {
    return JSON.parse(fn.arguments);
  } catch {
    throw new ChatTemplateError(
      `tool call ${fn.name}: arguments ${JSON.stringify(fn.arguments.slice(0, 80))} are not JSON, and this template renders them parameter by parameter`,
    );
  }
}

export class ChatTemplate {
  private readonly template: Template;
  /**
   * The template walks tool-call arguments as a mapping (Qwen3.5's XML `<parameter=…>` format:
   * `tool_call.arguments|items`), so OpenAI-style JSON strings are handed over parsed.
   * Templates that print a string as is (Qwen3's Hermes JSON) keep the string.
   */
  private readonly argumentObjects: boolean;

  constructor(
    readonly source: string,
    /** bos_token, eos_token, … as tokenizer_config.json names them. */
    readonly specialTokens: Record<string, string | null> = {},
  ) {
    this.argumentObjects = /arguments\s*\|\s*items/.test(source);
    try {
      this.template = new Template(source);
    } catch (e) {
      throw new ChatTemplateError(`chat template does not parse: ${(e as Error).message}`);
    }
  }

  static fromTokenizer(tokenizer: Tokenizer): ChatTemplate {
    if (tokenizer.chatTemplate === null)
      throw new ChatTemplateError("tokenizer_config.json has no chat_template (and no chat_template.jinja)");
    return new ChatTemplate(tokenizer.chatTemplate, {
      bos_token: tokenizer.bosToken,
      eos_token: tokenizer.eosToken,
      pad_token: tokenizer.padToken,
    });
  }

  render(messages: readonly Message[], options: RenderOptions = {}): string {
    const vars: Record<string, unknown> = {
      ...Object.fromEntries(Object.entries(this.specialTokens).filter(([, v]) => v !== null)),
      ...options.extra,
      messages: templateMessages(messages, this.argumentObjects),
      add_generation_prompt: options.addGenerationPrompt ?? false,
    };
    if (options.tools && options.tools.length > 0) vars.tools = options.tools;
    if (options.enableThinking !== undefined) vars.enable_thinking = options.enableThinking;
    try {
      return this.template.render(vars);
    } catch (e) {
      throw new ChatTemplateError(
        `chat template failed to render ${messages.length} messages: ${(e as Error).message}`,
      );
    }
  }
}
