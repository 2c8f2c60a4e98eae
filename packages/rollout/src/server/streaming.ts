// Streaming (SSE): chat completion chunks sent as the policy produces text, with backpressure;
// a client that goes away ends the stream quietly (and its AbortSignal stops the generation).
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { ChatCompletionRequest, CompletionRequest } from "../openai-wire.js";
import type { Generation } from "../types.js";
import {
  chatInputs,
  chatParams,
  choiceSeed,
  completer,
  completion,
  completionParams,
  preparePrompt,
  requestSeed,
  toChoice,
  usageOf,
} from "./generation.js";
import type { ServerConfig } from "./options.js";

const STREAM_MARKERS = ["<think>", "<tool_call>"];

const stopList = (stop: string | string[] | undefined): string[] =>
  stop === undefined ? [] : typeof stop === "string" ? [stop] : stop;

/**
 * The part of `raw` that may be sent now: all of it up to the first stop string (then `stopped`),
 * else all but the last `holdBack` characters, which could still begin a stop string.
 */
function sendablePrefix(raw: string, stops: string[], holdBack: number): { safe: string; stopped: boolean } {
  const stopAt = stops.reduce((at, st) => {
    const i = st === "" ? -1 : raw.indexOf(st);
    return i >= 0 && (at < 0 || i < at) ? i : at;
  }, -1);
  if (stopAt >= 0) return { safe: raw.slice(0, stopAt), stopped: true };
  return { safe: raw.slice(0, Math.max(0, raw.length - holdBack)), stopped: false };
}

/**
 * An SSE response: `write` sends a frame now (headers first, once); `send` also waits for the
 * client to drain, at most `stallMs`: a client that stops reading is disconnected (which aborts
 * its generation) rather than holding a slot for ever.
 */
export class SseWriter {
  private started = false;
  private stall: NodeJS.Timeout | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly frame: (chunk: object) => string,
    private readonly stallMs: number,
  ) {}

  /** Whether the client is still there to write to. */
  get open(): boolean {
    return !this.res.destroyed && !this.res.writableEnded;
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
  }

  /**
   * Sends `chunk` without waiting (text arrives from a policy's synchronous callback); once the
   * client stops draining, it has `stallMs` to resume before it is disconnected, so a reader that
   * stops reading cannot make the server buffer a whole generation.
   */
  write(chunk: object): void {
    this.start();
    if (this.res.write(this.frame(chunk)) || this.stall) return;
    const res = this.res;
    const clear = () => {
      if (this.stall) clearTimeout(this.stall);
      this.stall = null;
      res.off("drain", clear);
      res.off("close", clear);
    };
    this.stall = setTimeout(() => {
      clear();
      res.destroy();
    }, this.stallMs);
    res.on("drain", clear);
    res.on("close", clear);
  }

  /** Sends `chunk`, waiting out backpressure; false when the client went away (stop quietly). */
  async send(chunk: object): Promise<boolean> {
    const res = this.res;
    if (res.destroyed || res.writableEnded) return false;
    this.start();
    if (!res.write(this.frame(chunk)))
      await new Promise<void>((r) => {
        const stalled = setTimeout(() => {
          res.destroy();
          done();
        }, this.stallMs);
        const done = () => {
          clearTimeout(stalled);
          res.off("drain", done);
          res.off("close", done);
          r();
        };
        res.on("drain", done);
        res.on("close", done);
      });
    return !res.destroyed;
  }

  end(): void {
    if (!this.res.destroyed) this.res.end("data: [DONE]\n\n");
  }
}

export async function streamChat(
  config: ServerConfig,
  request: ChatCompletionRequest,
  res: ServerResponse,
  signal: AbortSignal,
): Promise<void> {
  const { messages, tools } = chatInputs(request);
  const baseSeed = requestSeed(request.seed);
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const model = request.model ?? config.servedModelNames[0];
  const out = new SseWriter(
    res,
    (chunk) => `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, ...chunk })}\n\n`,
    config.connections.bodyTimeoutMs,
  );
  // Text is sent as it is generated unless the reply may turn into something else once parsed
  // (tool calls, a <think> block) or needs token-aligned log-probs; the last characters are held
  // back until the end so that a stop string is never sent before it is cut.
  const stops = stopList(request.stop);
  const holdBack = Math.max(0, ...stops.map((s) => s.length - 1));
  const live = !(tools && tools.length > 0) && !request.logprobs;
  const gens: Generation[] = [];
  const n = request.n ?? 1;
  for (let index = 0; index < n; index++) {
    if (!(await out.send({ choices: [{ index, delta: { role: "assistant", content: "" }, finish_reason: null }] })))
      return;
    let raw = "";
    let sent = "";
    let liveOk = live;
    const onText = (piece: string) => {
      if (!liveOk || !out.open) return;
      raw += piece;
      const head = raw.trimStart();
      if (head === "") return;
      // A reply opening with a marker is reasoning or a tool call, parsed at the end: not streamed live.
      if (sent === "" && STREAM_MARKERS.some((m) => head.startsWith(m))) {
        liveOk = false;
        return;
      }
      if (sent === "" && STREAM_MARKERS.some((m) => m.startsWith(head))) return; // may still become one
      // Text after a stop string is never sent, even from a policy that generates past it.
      const { safe, stopped } = sendablePrefix(raw, stops, holdBack);
      if (stopped) {
        raw = safe;
        liveOk = false;
      }
      if (safe.length > sent.length) {
        const delta = safe.slice(sent.length);
        sent = safe;
        out.write({ choices: [{ index, delta: { content: delta }, logprobs: null, finish_reason: null }] });
      }
    };
    const gen = await config.policy.generate(messages, tools, {
      ...chatParams(request, choiceSeed(baseSeed, index), signal),
      onText,
    });
    gens.push(gen);
    const choice = toChoice(gen, index, messages, tools, request);
    if (choice.message.reasoning_content !== undefined && sent === "") {
      if (
        !(await out.send({
          choices: [{ index, delta: { reasoning_content: choice.message.reasoning_content }, finish_reason: null }],
        }))
      )
        return;
    }
    const content = choice.message.content ?? "";
    let pieces: string[];
    if (sent !== "") {
      // The streamed text is a prefix of the final content (see holdBack); send the rest.
      pieces = content.startsWith(sent) && content.length > sent.length ? [content.slice(sent.length)] : [];
    } else {
      // Content in token-sized pieces when token texts are known, else one piece.
      pieces =
        choice.message.tool_calls || !gen.logprobs || gen.logprobs.map((l) => l.token).join("") !== content
          ? content === ""
            ? []
            : [content]
          : gen.logprobs.map((l) => l.token);
    }
    for (const [k, piece] of pieces.entries()) {
      const lp =
        sent === "" && choice.logprobs && pieces.length === choice.logprobs.content.length
          ? { content: [choice.logprobs.content[k]] }
          : null;
      if (!(await out.send({ choices: [{ index, delta: { content: piece }, logprobs: lp, finish_reason: null }] })))
        return;
    }
    if (choice.message.tool_calls) {
      const delta = { tool_calls: choice.message.tool_calls.map((tc, i) => ({ index: i, ...tc })) };
      if (!(await out.send({ choices: [{ index, delta, finish_reason: null }] }))) return;
    }
    if (!(await out.send({ choices: [{ index, delta: {}, finish_reason: choice.finish_reason }] }))) return;
  }
  if (request.stream_options?.include_usage && !(await out.send({ choices: [], usage: usageOf(gens) }))) return;
  out.end();
}

/**
 * A streamed /v1/completions (vLLM and OpenAI's legacy streaming): `text_completion` chunks as
 * the policy produces text (the echoed prompt first), then each choice's finish_reason, usage
 * when asked, and [DONE]. With logprobs the choices are sent whole once generated, each as one
 * chunk carrying its log-probs.
 */
export async function streamCompletion(
  config: ServerConfig,
  request: CompletionRequest,
  res: ServerResponse,
  signal: AbortSignal,
): Promise<void> {
  const id = `cmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const model = request.model ?? config.servedModelNames[0];
  const out = new SseWriter(
    res,
    (chunk) => `data: ${JSON.stringify({ id, object: "text_completion", created, model, ...chunk })}\n\n`,
    config.connections.bodyTimeoutMs,
  );
  const withUsage = request.stream_options?.include_usage === true;
  const wantLogprobs =
    (request.logprobs !== undefined && request.logprobs !== null) ||
    (request.prompt_logprobs !== undefined && request.prompt_logprobs !== null);
  if (wantLogprobs) {
    const whole = await completion(config, request, signal);
    for (const choice of whole.choices) if (!(await out.send({ choices: [choice] }))) return;
    if (withUsage && !(await out.send({ choices: [], usage: whole.usage }))) return;
    out.end();
    return;
  }
  const { promptIds, promptText, maxTokens } = preparePrompt(config, request);
  const complete = maxTokens > 0 ? completer(config) : null;
  const stops = stopList(request.stop);
  const holdBack = Math.max(0, ...stops.map((s) => s.length - 1));
  const baseSeed = requestSeed(request.seed);
  const n = request.n ?? 1;
  let completionTokens = 0;
  const piece = (index: number, text: string, finish: string | null) => ({
    choices: [{ index, text, logprobs: null, finish_reason: finish }],
  });
  for (let index = 0; index < n; index++) {
    if (request.echo && !(await out.send(piece(index, promptText, null)))) return;
    if (!complete) {
      if (!(await out.send(piece(index, "", "length")))) return;
      continue;
    }
    let raw = "";
    let sent = "";
    let live = true;
    const onText = (text: string) => {
      if (!live || !out.open) return;
      raw += text;
      const { safe, stopped } = sendablePrefix(raw, stops, holdBack);
      if (stopped) live = false;
      if (safe.length > sent.length) {
        out.write(piece(index, safe.slice(sent.length), null));
        sent = safe;
      }
    };
    const gen = await complete(promptIds, {
      ...completionParams(request, maxTokens, choiceSeed(baseSeed, index), signal),
      onText,
    });
    completionTokens += gen.completionTokenIds?.length ?? 0;
    // The policy's text is final (stop strings cut); what was streamed is a prefix of it.
    const rest = gen.text.startsWith(sent) ? gen.text.slice(sent.length) : "";
    if (rest !== "" && !(await out.send(piece(index, rest, null)))) return;
    const finish = gen.finishReason === "length" ? "length" : "stop";
    if (!(await out.send(piece(index, "", finish)))) return;
  }
  if (withUsage) {
    const usage = {
      prompt_tokens: promptIds.length,
      completion_tokens: completionTokens,
      total_tokens: promptIds.length + completionTokens,
    };
    if (!(await out.send({ choices: [], usage }))) return;
  }
  out.end();
}
