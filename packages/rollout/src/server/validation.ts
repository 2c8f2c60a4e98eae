// Request validation: the wire schema (zod), the checks OpenAI and vLLM make beyond it (tool
// schemas, tool_choice, logprob options, penalties) and this server's limits, all before a
// request queues, so a bad request never waits for (or holds) a slot. Every refusal is a 400
// naming the offending field in `param`, as OpenAI's and vLLM's are.
//
// Limits are counted in the unit that costs, cheapest first: the body's bytes (while it is read,
// http.ts), the number of messages (before the body is validated at all), then the characters
// that reach the chat template — every message's content, role, name and tool calls plus the
// tools' schemas — so templating and tokenizing a request that passes is bounded work. Tokens
// after templating are the policy's to count (kiln serve's worker refuses a prompt that does not
// fit the context with a 400 before generating).
import type { z } from "zod";
import { type ChatCompletionRequest, type CompletionRequest, wireContentText } from "../openai-wire.js";
import { checkJsonSchemaDefinition } from "../tool-schema-validate.js";
import { HttpError } from "./http.js";
import type { ServerConfig } from "./options.js";

/** OpenAI's limit on the tools of one request. */
const MAX_TOOLS = 128;
/** Characters a chat template adds around each message (role markers, separators), counted towards the prompt cap. */
const MESSAGE_OVERHEAD_CHARS = 8;

const invalid = (message: string, param: string | null) => new HttpError(400, message, "invalid_request_error", param);

/** `value` parsed by `schema`; the first issue becomes a 400 naming its path. */
export function validate<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const param = issue.path.join(".") || null;
  throw invalid(`invalid request: ${param ?? "body"}: ${issue.message}`, param);
}

/**
 * Counts checked on the parsed JSON before schema validation, whose cost grows with them: a
 * request of 120,000 empty messages is refused here in microseconds.
 */
export function precheckChat(config: ServerConfig, json: unknown): void {
  if (typeof json !== "object" || json === null) return; // the schema names the problem
  const { messages, tools } = json as { messages?: unknown; tools?: unknown };
  if (Array.isArray(messages) && messages.length > config.maxMessages)
    throw invalid(
      `messages: ${messages.length} messages; this server accepts at most ${config.maxMessages} per request`,
      "messages",
    );
  if (Array.isArray(tools) && tools.length > MAX_TOOLS)
    throw invalid(`tools: ${tools.length} tools; at most ${MAX_TOOLS} per request`, "tools");
}

function checkMaxTokens(config: ServerConfig, value: number | undefined, param: string): void {
  if (value !== undefined && value > config.maxTokensLimit)
    throw invalid(`${param} = ${value} exceeds this server's limit of ${config.maxTokensLimit}`, param);
}

/** Sampling fields the server accepts only at their neutral value (it cannot apply the others). */
function checkUnapplied(request: ChatCompletionRequest | CompletionRequest): void {
  for (const field of ["frequency_penalty", "presence_penalty"] as const) {
    const v = request[field];
    if (v !== undefined && v !== 0)
      throw invalid(
        `${field} = ${v} is not supported by this server (its sampler applies no ${field}); send 0 or leave it out`,
        field,
      );
  }
  if (request.repetition_penalty !== undefined && request.repetition_penalty !== 1)
    throw invalid(
      `repetition_penalty = ${request.repetition_penalty} is not supported by this server; send 1 or leave it out`,
      "repetition_penalty",
    );
  if (request.logit_bias && Object.keys(request.logit_bias).length > 0)
    throw invalid("logit_bias is not supported by this server; leave it out", "logit_bias");
  if (request.stream_options && !request.stream)
    throw invalid("stream_options is only allowed when stream is true", "stream_options");
}

/** Characters the chat template receives: what templating and tokenizing cost grows with. */
function templatedChars(request: ChatCompletionRequest): number {
  let chars = 0;
  for (const m of request.messages) {
    chars += MESSAGE_OVERHEAD_CHARS + m.role.length + (wireContentText(m.content) ?? "").length;
    chars += (m.name?.length ?? 0) + (m.tool_call_id?.length ?? 0) + (m.reasoning_content?.length ?? 0);
    for (const tc of m.tool_calls ?? []) chars += tc.id.length + tc.function.name.length + tc.function.arguments.length;
  }
  if (request.tools) chars += JSON.stringify(request.tools).length;
  return chars;
}

function checkTools(request: ChatCompletionRequest): void {
  const tools = request.tools ?? [];
  const names = new Set<string>();
  tools.forEach((tool, i) => {
    const name = tool.function.name;
    if (names.has(name)) throw invalid(`tools[${i}]: a second function named "${name}"`, `tools.${i}.function.name`);
    names.add(name);
    const parameters = tool.function.parameters;
    if (parameters === undefined) return;
    const param = `tools.${i}.function.parameters`;
    if (parameters.type !== undefined && parameters.type !== "object")
      throw invalid(
        `invalid schema for function "${name}": parameters must be a JSON Schema of type "object", got type ${JSON.stringify(parameters.type)}`,
        param,
      );
    const problems = checkJsonSchemaDefinition(parameters);
    if (problems.length > 0)
      throw invalid(
        `invalid schema for function "${name}": ${problems[0].message.replace(/^\//, "parameters/")}`,
        param,
      );
  });
  const choice = request.tool_choice;
  if (choice === undefined || choice === "none" || choice === "auto") return;
  if (tools.length === 0)
    throw invalid(
      `tool_choice ${typeof choice === "string" ? `"${choice}"` : `names function "${choice.function.name}"`} but the request has no tools`,
      "tool_choice",
    );
  if (typeof choice === "object" && !names.has(choice.function.name))
    throw invalid(
      `tool_choice names function "${choice.function.name}", which is not among the tools (${[...names].join(", ")})`,
      "tool_choice",
    );
  // Forcing a call needs constrained decoding, which this server does not do: refused, not ignored.
  throw invalid(
    `tool_choice ${typeof choice === "string" ? `"${choice}"` : "naming a function"} is not supported by this server (no constrained decoding); send "auto" (the model decides) or "none"`,
    "tool_choice",
  );
}

/** Top-level fields of `json` that `schema` does not know (they would be ignored). */
export function unknownFields(schema: { shape: Record<string, unknown> }, json: unknown): string[] {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return [];
  return Object.keys(json).filter((key) => !(key in schema.shape));
}

export function checkChat(config: ServerConfig, request: ChatCompletionRequest): ChatCompletionRequest {
  if ((request.n ?? 1) > config.maxN) throw invalid(`n must be <= ${config.maxN}`, "n");
  checkMaxTokens(config, request.max_tokens, "max_tokens");
  checkMaxTokens(config, request.max_completion_tokens, "max_completion_tokens");
  if (request.top_logprobs !== undefined && !request.logprobs)
    throw invalid("top_logprobs needs logprobs: true", "top_logprobs");
  checkUnapplied(request);
  if (request.response_format && request.response_format.type !== "text")
    throw invalid(
      `response_format ${request.response_format.type} is not supported by this server (no constrained decoding); leave it out or send {"type": "text"}`,
      "response_format",
    );
  checkTools(request);
  const chars = templatedChars(request);
  if (chars > config.maxPromptChars)
    throw invalid(
      `messages and tools hold ${chars} characters; this server accepts at most ${config.maxPromptChars}`,
      "messages",
    );
  return request;
}

export function checkCompletion(config: ServerConfig, request: CompletionRequest): CompletionRequest {
  if ((request.n ?? 1) > config.maxN) throw invalid(`n must be <= ${config.maxN}`, "n");
  checkMaxTokens(config, request.max_tokens, "max_tokens");
  checkUnapplied(request);
  if (request.best_of !== undefined && request.best_of !== null && request.best_of !== (request.n ?? 1))
    throw invalid(
      `best_of = ${request.best_of} is not supported by this server; leave it out or equal to n`,
      "best_of",
    );
  if (request.suffix !== undefined && request.suffix !== null)
    throw invalid("suffix is not supported by this server", "suffix");
  if (typeof request.prompt === "string") {
    if (request.prompt.length === 0) throw invalid("prompt is empty", "prompt");
    if (request.prompt.length > config.maxPromptChars)
      throw invalid(
        `prompt of ${request.prompt.length} characters exceeds the limit of ${config.maxPromptChars}`,
        "prompt",
      );
  } else {
    if (config.contextLength !== undefined && request.prompt.length > config.contextLength)
      throw invalid(
        `prompt of ${request.prompt.length} tokens exceeds the model's context length of ${config.contextLength}`,
        "prompt",
      );
    if (config.vocabSize !== undefined) {
      const vocabSize = config.vocabSize;
      const bad = request.prompt.findIndex((id) => id >= vocabSize);
      if (bad >= 0)
        throw invalid(
          `prompt[${bad}] = ${request.prompt[bad]} is not a token id (vocabulary size ${vocabSize})`,
          "prompt",
        );
    }
  }
  return request;
}
