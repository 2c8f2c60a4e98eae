// The model side of `kiln serve`, run in a worker thread so that prefill and decoding never block
// the HTTP server's event loop (/health and queued clients stay responsive). Concurrent requests
// from the server's WorkerPolicy share decode steps through @kiln/models' BatchScheduler
// (continuous batching, `maxNumSeqs` sequences at once); each streams its completion text back as
// it is decoded and is dropped between steps once its shared cancel flag is set (the HTTP client
// disconnected). A model the scheduler cannot batch (recurrent layers) runs one request at a time.
import { parentPort, workerData } from "node:worker_threads";
import {
  BatchScheduler,
  type ChatTemplate,
  type GenerationOutput,
  type ScheduledGenerateOptions,
  generate,
  scoreCompletions,
  toGeneration,
} from "@kiln/models";
import type { GenerateParams, Message, ToolSchema } from "@kiln/rollout";
import { initBackend } from "@kiln/tensor";
import { type AdapterSpec, chatTemplateFor, loadLocalModel } from "./policies.js";

export interface ServeWorkerInit {
  dir: string;
  adapters?: AdapterSpec[];
  /** `--chat-template`: "chatml" or a Jinja file, for models that ship none. */
  chatTemplate?: string;
  backend: string;
  /** The backend's threads (default its own). */
  threads?: number;
  /** `max_tokens` when a chat request gives none (capped by the room left in the context). */
  defaultMaxTokens: number;
  /** Sequences decoded together: the server's `--max-concurrency` (`--max-num-seqs`). Default 16. */
  maxNumSeqs?: number;
  /** KV cache bytes the sequences in flight may reserve (default: the scheduler's). */
  kvBudgetBytes?: number;
  /** Bytes of cached prompt-prefix KV rows (default: the scheduler's; 0: no prefix cache). */
  prefixCacheBytes?: number;
  /** `--max-model-len`: the context served, when less than the model's. */
  maxModelLen?: number;
}

export interface ServeWorkerInfo {
  /** The model's own context length (`max_position_embeddings`). */
  contextLength: number;
  vocabSize: number;
  hasChatTemplate: boolean;
  /** The worker's backend as initBackend describes it (name, BLAS and threads on native). */
  backendLine: string;
  /** The scheduler's prefix cache capacity in bytes (0: off); null where the model decodes without one. */
  prefixCacheBytes: number | null;
}

/** Parameters as they cross the thread boundary (no signal, no callback). */
export type WireParams = Omit<GenerateParams, "signal" | "onText">;

/** `stream`: whether the caller wants text pieces as they are decoded (only then are they decoded). */
export type ServeWorkerRequest = { id: number; cancel: Int32Array; stream: boolean } & (
  | { kind: "chat"; messages: Message[]; tools?: ToolSchema[]; params: WireParams }
  | { kind: "complete"; prompt: string | number[]; params: WireParams }
  | { kind: "score"; messages: Message[]; completion: string | number[]; tools?: ToolSchema[] }
);

export type ServeWorkerReply =
  | { type: "ready"; info: ServeWorkerInfo }
  | { type: "startup-error"; message: string }
  | { type: "text"; id: number; piece: string }
  | { type: "done"; id: number; result: unknown }
  | { type: "fail"; id: number; message: string; name: string; status?: number; param?: string | null };

class RequestRefused extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}
class Cancelled extends Error {}

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error("serve-worker.ts runs as a worker thread of kiln serve");
  const init = workerData.init as ServeWorkerInit;
  const reply = (m: ServeWorkerReply) => port.postMessage(m);
  let model: Awaited<ReturnType<typeof loadLocalModel>>["model"];
  let tokenizer: Awaited<ReturnType<typeof loadLocalModel>>["tokenizer"];
  let template: ChatTemplate | null = null;
  let backendLine = "kiln backend: js";
  try {
    if (init.backend !== "js")
      backendLine = (
        await initBackend(init.backend as Parameters<typeof initBackend>[0], {
          ...(init.threads !== undefined ? { threads: init.threads } : {}),
        })
      ).line;
    ({ model, tokenizer } = await loadLocalModel(init.dir, init.adapters));
    // A base model without a template is still served: /v1/completions works, chat answers 400.
    if (init.chatTemplate !== undefined || tokenizer.chatTemplate !== null)
      template = await chatTemplateFor(init.dir, tokenizer, init.chatTemplate);
  } catch (err) {
    reply({ type: "startup-error", message: err instanceof Error ? err.message : String(err) });
    return;
  }
  const scheduler = model.supportsRaggedBatches
    ? new BatchScheduler(model, {
        maxNumSeqs: init.maxNumSeqs ?? 16,
        ...(init.kvBudgetBytes !== undefined ? { kvBudgetBytes: init.kvBudgetBytes } : {}),
        ...(init.prefixCacheBytes !== undefined ? { prefixCacheBytes: init.prefixCacheBytes } : {}),
      })
    : null;
  const contextLength = model.config.maxPositionEmbeddings;
  const servedContext = Math.min(contextLength, init.maxModelLen ?? contextLength);
  const vocabSize = model.config.vocabSize;
  const stopIds = new Set<number>(model.config.eosTokenIds);
  if (tokenizer.eosTokenId !== null && tokenizer.eosTokenId !== undefined) stopIds.add(tokenizer.eosTokenId);

  const checkPrompt = (ids: readonly number[], param: string) => {
    if (ids.length === 0) throw new RequestRefused("the prompt is empty", param);
    const bad = ids.find((id) => !(Number.isInteger(id) && id >= 0 && id < vocabSize));
    if (bad !== undefined)
      throw new RequestRefused(`token id ${bad} is outside the vocabulary [0, ${vocabSize})`, param);
  };

  const run = async (
    id: number,
    cancel: Int32Array,
    prompt: number[],
    p: WireParams,
    tools: ToolSchema[] | undefined,
    chat: boolean,
    stream: boolean,
  ) => {
    const param = chat ? "messages" : "prompt";
    checkPrompt(prompt, param);
    const room = servedContext - prompt.length;
    if (room < 1)
      throw new RequestRefused(
        `the prompt is ${prompt.length} tokens; this model's context length is ${servedContext}`,
        param,
      );
    const maxTokens = p.maxTokens ?? Math.min(init.defaultMaxTokens, room);
    if (maxTokens > room)
      throw new RequestRefused(
        `prompt (${prompt.length} tokens) + max_tokens (${maxTokens}) exceeds this model's context length of ${servedContext}`,
        "max_tokens",
      );
    // Incremental detokenization: decode from a recent offset and send only what is new, holding
    // back text that ends inside a UTF-8 character (U+FFFD) until the next token completes it.
    const ids: number[] = [];
    let prefix = 0;
    let read = 0;
    const startedAt = Date.now();
    const onToken = (token: number) => {
      if (Atomics.load(cancel, 0) === 1) throw new Cancelled("cancelled");
      if (!stream || stopIds.has(token)) return;
      ids.push(token);
      const before = read > prefix ? tokenizer.decode(ids.slice(prefix, read)) : "";
      const now = tokenizer.decode(ids.slice(prefix));
      if (now.length > before.length && !now.endsWith("\uFFFD")) {
        reply({ type: "text", id, piece: now.slice(before.length) });
        prefix = read;
        read = ids.length;
      }
    };
    const options: ScheduledGenerateOptions = {
      temperature: p.temperature,
      topP: p.topP,
      topK: p.topK,
      minP: p.minP,
      maxNewTokens: maxTokens,
      seed: p.seed ?? 0,
      stopStrings: p.stop,
      topLogprobs: p.topLogprobs,
      tokenizer,
    };
    const out: GenerationOutput = scheduler
      ? await scheduler.generate(prompt, { ...options, onToken, cancelled: () => Atomics.load(cancel, 0) === 1 })
      : generate(model, [prompt], { ...options, onToken: (_row, token) => onToken(token) })[0];
    const generation = toGeneration(out, tokenizer, {
      tools,
      parse: chat,
      logprobs: p.logprobs || p.topLogprobs !== undefined,
    });
    generation.timings = { startedAt, durationMs: Date.now() - startedAt };
    return generation;
  };

  const scoreOne = async (promptIds: number[], completionIds: number[], cancel: Int32Array): Promise<number[]> =>
    scheduler
      ? (await scheduler.score({ promptIds, completionIds }, { cancelled: () => Atomics.load(cancel, 0) === 1 }))
          .logprobs
      : scoreCompletions(model, [{ promptIds, completionIds }])[0];

  const handle = async (req: ServeWorkerRequest): Promise<unknown> => {
    if (Atomics.load(req.cancel, 0) === 1) throw new Cancelled("cancelled before it started");
    if (req.kind === "complete") {
      const ids =
        typeof req.prompt === "string" ? tokenizer.encode(req.prompt, { addSpecialTokens: true }) : req.prompt;
      return run(req.id, req.cancel, ids, req.params, undefined, false, req.stream);
    }
    if (req.kind === "chat") {
      if (!template)
        throw new RequestRefused(
          "this model has no chat template: use /v1/completions, or restart kiln serve with --chat-template chatml (ChatML, for models trained on it) or --chat-template FILE (a Jinja template)",
          "messages",
        );
      const text = template.render(req.messages, {
        tools: req.tools,
        addGenerationPrompt: true,
        enableThinking: req.params.enableThinking,
      });
      return run(req.id, req.cancel, tokenizer.encode(text), req.params, req.tools, true, req.stream);
    }
    // Score: with no messages the completion is a raw token sequence (Policy.score's contract).
    const tokenIds = typeof req.completion === "string" ? tokenizer.encode(req.completion) : [...req.completion];
    checkPrompt(tokenIds, "prompt");
    if (req.messages.length === 0) {
      const rest = tokenIds.length > 1 ? await scoreOne(tokenIds.slice(0, 1), tokenIds.slice(1), req.cancel) : [];
      return { tokenIds, logprobs: [0, ...rest] };
    }
    if (!template)
      throw new RequestRefused(
        "this model has no chat template: restart kiln serve with --chat-template chatml or --chat-template FILE",
        "messages",
      );
    const prompt = tokenizer.encode(template.render(req.messages, { tools: req.tools, addGenerationPrompt: true }));
    return { tokenIds, logprobs: await scoreOne(prompt, tokenIds, req.cancel) };
  };

  // Not awaited one by one: every request in flight joins the scheduler's running batch.
  port.on("message", async (req: ServeWorkerRequest) => {
    try {
      reply({ type: "done", id: req.id, result: await handle(req) });
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      const refused = e instanceof RequestRefused || e.name === "GenerationError" || e.name === "ChatTemplateError";
      reply({
        type: "fail",
        id: req.id,
        message: e.message,
        name: e instanceof Cancelled || e.name === "GenerationAbortedError" ? "GenerationAbortedError" : e.name,
        ...(refused ? { status: 400, param: e instanceof RequestRefused ? e.param : null } : {}),
      });
    }
  });
  reply({
    type: "ready",
    info: {
      contextLength,
      vocabSize,
      hasChatTemplate: template !== null,
      backendLine,
      prefixCacheBytes: scheduler ? scheduler.stats().prefixCacheBytes : null,
    },
  });
}

// No top-level await: the CJS build of this entry cannot have one. main() reports its own
// failures to the parent; anything that still escapes ends the worker with an error exit.
main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
