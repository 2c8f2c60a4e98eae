// Request validation: the wire schema (zod) and this server's limits, checked before a request
// queues, so a bad request never waits for (or holds) a slot. Every refusal is a 400 naming the
// offending field in `param`, as OpenAI's and vLLM's are.
import type { z } from "zod";
import { type ChatCompletionRequest, type CompletionRequest, wireContentText } from "../openai-wire.js";
import { HttpError } from "./http.js";
import type { ServerConfig } from "./options.js";

/** `value` parsed by `schema`; the first issue becomes a 400 naming its path. */
export function validate<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const param = issue.path.join(".") || null;
  throw new HttpError(400, `invalid request: ${param ?? "body"}: ${issue.message}`, "invalid_request_error", param);
}

function checkMaxTokens(config: ServerConfig, value: number | undefined, param: string): void {
  if (value !== undefined && value > config.maxTokensLimit)
    throw new HttpError(
      400,
      `${param} = ${value} exceeds this server's limit of ${config.maxTokensLimit}`,
      "invalid_request_error",
      param,
    );
}

export function checkChat(config: ServerConfig, request: ChatCompletionRequest): ChatCompletionRequest {
  if ((request.n ?? 1) > config.maxN)
    throw new HttpError(400, `n must be <= ${config.maxN}`, "invalid_request_error", "n");
  checkMaxTokens(config, request.max_tokens, "max_tokens");
  checkMaxTokens(config, request.max_completion_tokens, "max_completion_tokens");
  let chars = 0;
  for (const m of request.messages) chars += (wireContentText(m.content) ?? "").length;
  if (chars > config.maxPromptChars)
    throw new HttpError(
      400,
      `messages hold ${chars} characters; this server accepts at most ${config.maxPromptChars}`,
      "invalid_request_error",
      "messages",
    );
  return request;
}

export function checkCompletion(config: ServerConfig, request: CompletionRequest): CompletionRequest {
  if ((request.n ?? 1) > config.maxN)
    throw new HttpError(400, `n must be <= ${config.maxN}`, "invalid_request_error", "n");
  checkMaxTokens(config, request.max_tokens, "max_tokens");
  if (typeof request.prompt === "string") {
    if (request.prompt.length === 0) throw new HttpError(400, "prompt is empty", "invalid_request_error", "prompt");
    if (request.prompt.length > config.maxPromptChars)
      throw new HttpError(
        400,
        `prompt of ${request.prompt.length} characters exceeds the limit of ${config.maxPromptChars}`,
        "invalid_request_error",
        "prompt",
      );
  } else if (config.vocabSize !== undefined) {
    const vocabSize = config.vocabSize;
    const bad = request.prompt.findIndex((id) => id >= vocabSize);
    if (bad >= 0)
      throw new HttpError(
        400,
        `prompt[${bad}] = ${request.prompt[bad]} is not a token id (vocabulary size ${vocabSize})`,
        "invalid_request_error",
        "prompt",
      );
  }
  return request;
}
