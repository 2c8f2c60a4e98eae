// `kiln serve`: the OpenAI-compatible server of @kiln/rollout in this thread, the model in a worker
// thread (serve-worker.ts). The split is what keeps the server responsive: a long prefill or a
// 4k-token generation runs beside the event loop, never on it.
import { readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { Worker } from "node:worker_threads";
import { loadTokenizer } from "@kiln/models";
import {
  createOpenAIServer,
  type GenerateParams,
  type Generation,
  GenerationAbortedError,
  type Message,
  type OpenAIServer,
  type Policy,
  PolicyRequestError,
  type ServedAdapter,
  type TokenScores,
  type ToolSchema,
} from "@kiln/rollout";
import type { AdapterSpec } from "./policies.js";
import type {
  ServeWorkerInfo,
  ServeWorkerInit,
  ServeWorkerReply,
  ServeWorkerRequest,
  WireParams,
} from "./serve-worker.js";

export interface ServeOptions {
  /** Hugging Face model directory. */
  dir: string;
  /** PEFT adapters applied in order, each with its scale (`--adapter a,b --adapter-scale s,t`). */
  adapters?: AdapterSpec[];
  /** Jinja chat template file, for models whose tokenizer_config.json has none. */
  chatTemplate?: string;
  /** Tensor backend in the worker (default "wasm"). */
  backend?: string;
  /** The worker backend's threads (`--threads`; default the backend's own: min(2, cores) for wasm/native). */
  threads?: number;
  /**
   * Bytes of prompt-prefix KV rows the worker's scheduler keeps for reuse (`--prefix-cache-bytes`; default the
   * scheduler's 256 MiB, 0 turns the cache off). A hit has the bits of a recompute (docs/ARCHITECTURE.md).
   */
  prefixCacheBytes?: number;
  /**
   * The names clients may send as `model`, the first the main one (vLLM's `--served-model-name`);
   * any other name is a 404 `model_not_found`. Default: `[modelId ?? dir]`.
   */
  servedModelNames?: string[];
  /** The served name when there are no aliases (default: `dir`, as vLLM names a model by its path). */
  modelId?: string;
  host?: string;
  port?: number;
  apiKey?: string;
  /** Requests generated at once, decoded together by the worker (default 1); `maxNumSeqs` is vLLM's name for it. */
  maxConcurrency?: number;
  /** vLLM's `--max-num-seqs`: the same as `maxConcurrency` (give one, or both equal). */
  maxNumSeqs?: number;
  maxQueue?: number;
  /**
   * vLLM's `--max-model-len`: the context the server admits, prompt plus completion, at most the
   * model's own (default: the model's); the worker refuses a templated chat prompt against it too.
   */
  maxModelLen?: number;
  /** Largest max_tokens (default: min(context length, 4096)). */
  maxTokensLimit?: number;
  /** max_tokens of a chat request that gives none (default 256, capped by the room in the context). */
  defaultMaxTokens?: number;
  /** Start-up lines (the adapters applied) and one line per request. */
  log?: (line: string) => void;
  warn?: (line: string) => void;
}

export interface ServeHandle {
  server: OpenAIServer;
  info: ServeWorkerInfo;
  /** The adapters applied to the served weights, as /v1/models lists them. */
  adapters: ServedAdapter[];
  /** Requests the worker stopped early because their client went away. */
  cancelled(): number;
  close(): Promise<void>;
}

/** Where the worker's code is: the built file next to this one, or the TypeScript source through tsx. */
function workerEntry(): { url: URL; data: Record<string, unknown>; execArgv: string[] } {
  const here = import.meta.url;
  if (here.endsWith(".ts")) {
    return {
      url: new URL("./serve-worker-source.mjs", here),
      data: { entry: new URL("./serve-worker.ts", here).href },
      execArgv: ["--conditions=source"],
    };
  }
  return { url: new URL("./serve-worker.js", here), data: {}, execArgv: [] };
}

/** A Policy whose calls run in the model worker; `signal` and `onText` cross the thread boundary. */
class WorkerPolicy implements Policy {
  private next = 1;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; onText?: (piece: string) => void }
  >();
  private dead: Error | null = null;
  cancelledCount = 0;

  constructor(
    readonly id: string,
    private readonly worker: Worker,
  ) {
    worker.on("message", (m: ServeWorkerReply) => {
      if (m.type === "ready" || m.type === "startup-error") return;
      const p = this.pending.get(m.id);
      if (!p) return;
      if (m.type === "text") {
        p.onText?.(m.piece);
        return;
      }
      this.pending.delete(m.id);
      if (m.type === "done") p.resolve(m.result);
      else if (m.name === "GenerationAbortedError") {
        this.cancelledCount++;
        p.reject(new GenerationAbortedError(m.message));
      } else if (m.status !== undefined) p.reject(new PolicyRequestError(m.message, m.param ?? null, m.status));
      else p.reject(new Error(`${m.name}: ${m.message}`));
    });
    const fail = (err: Error) => {
      this.dead = err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    worker.on("error", (err) => fail(new Error(`model worker failed: ${err.message}`)));
    worker.on("exit", (code) => fail(new Error(`model worker exited with code ${code}`)));
  }

  private call<T>(request: Record<string, unknown>, params?: GenerateParams): Promise<T> {
    if (this.dead) return Promise.reject(this.dead);
    if (params?.signal?.aborted) return Promise.reject(new GenerationAbortedError("aborted before it started"));
    const id = this.next++;
    const cancel = new Int32Array(new SharedArrayBuffer(4));
    const onAbort = () => Atomics.store(cancel, 0, 1);
    params?.signal?.addEventListener("abort", onAbort, { once: true });
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, {
        resolve: (v) => resolve(v as T),
        reject,
        ...(params?.onText ? { onText: params.onText } : {}),
      });
      this.worker.postMessage({ ...request, id, cancel, stream: params?.onText !== undefined } as ServeWorkerRequest);
    }).finally(() => params?.signal?.removeEventListener("abort", onAbort));
  }

  generate(messages: Message[], tools?: ToolSchema[], params: GenerateParams = {}): Promise<Generation> {
    return this.call({ kind: "chat", messages, tools, params: wireParams(params) }, params);
  }

  complete(prompt: string | number[], params: GenerateParams = {}): Promise<Generation> {
    return this.call({ kind: "complete", prompt, params: wireParams(params) }, params);
  }

  score(messages: Message[], completion: string | number[], tools?: ToolSchema[]): Promise<TokenScores> {
    return this.call({ kind: "score", messages, completion, tools });
  }
}

function wireParams(params: GenerateParams): WireParams {
  const { signal: _signal, onText: _onText, ...rest } = params;
  return rest;
}

/** How one applied adapter is described: its directory, scale, and (when its config says) rank, alpha and targets. */
async function describeAdapter(spec: AdapterSpec): Promise<{ adapter: ServedAdapter; line: string }> {
  const adapter: ServedAdapter = { id: basename(spec.dir) || spec.dir, path: spec.dir, scale: spec.scale };
  let detail = "";
  try {
    const config = JSON.parse(await readFile(join(spec.dir, "adapter_config.json"), "utf8")) as {
      r?: unknown;
      lora_alpha?: unknown;
      target_modules?: unknown;
    };
    const targets = Array.isArray(config.target_modules) ? config.target_modules.join(",") : config.target_modules;
    detail = `, r ${String(config.r)}, alpha ${String(config.lora_alpha)}, targets ${String(targets)}`;
  } catch {
    detail = ""; // loaded already, so readable; a config without these fields is described by path alone
  }
  return { adapter, line: `kiln serve: applied adapter ${spec.dir} (scale ${spec.scale}${detail})` };
}

function concurrencyOf(options: ServeOptions): number {
  const { maxConcurrency, maxNumSeqs } = options;
  if (maxConcurrency !== undefined && maxNumSeqs !== undefined && maxConcurrency !== maxNumSeqs)
    throw new RangeError(
      `kiln serve: maxNumSeqs (${maxNumSeqs}) and maxConcurrency (${maxConcurrency}) name the same limit; give one`,
    );
  return maxNumSeqs ?? maxConcurrency ?? 1;
}

/** Loads the model in a worker and starts the server; resolves once both are ready. */
export async function startServe(options: ServeOptions): Promise<ServeHandle> {
  const maxConcurrency = concurrencyOf(options);
  const entry = workerEntry();
  const init: ServeWorkerInit = {
    dir: options.dir,
    ...(options.maxModelLen !== undefined ? { maxModelLen: options.maxModelLen } : {}),
    ...(options.adapters?.length ? { adapters: options.adapters } : {}),
    ...(options.chatTemplate ? { chatTemplate: options.chatTemplate } : {}),
    backend: options.backend ?? "wasm",
    ...(options.threads !== undefined ? { threads: options.threads } : {}),
    ...(options.prefixCacheBytes !== undefined ? { prefixCacheBytes: options.prefixCacheBytes } : {}),
    defaultMaxTokens: options.defaultMaxTokens ?? 256,
    // The server admits this many requests at once; the worker decodes them as one batch.
    maxNumSeqs: maxConcurrency,
  };
  const worker = new Worker(entry.url, { workerData: { ...entry.data, init }, execArgv: entry.execArgv });
  let info: ServeWorkerInfo;
  try {
    info = await new Promise<ServeWorkerInfo>((resolve, reject) => {
      const onMessage = (m: ServeWorkerReply) => {
        if (m.type === "ready") resolve(m.info);
        else if (m.type === "startup-error") reject(new Error(`kiln serve: cannot load ${options.dir}: ${m.message}`));
        else return;
        worker.off("message", onMessage);
      };
      worker.on("message", onMessage);
      worker.once("error", reject);
      worker.once("exit", (code) =>
        reject(new Error(`kiln serve: model worker exited with code ${code} while loading`)),
      );
    });
  } catch (err) {
    await worker.terminate();
    throw err;
  }
  if (options.maxModelLen !== undefined && options.maxModelLen > info.contextLength) {
    await worker.terminate();
    throw new Error(
      `kiln serve: --max-model-len ${options.maxModelLen} exceeds ${options.dir}'s context length ${info.contextLength}`,
    );
  }
  const contextLength = Math.min(info.contextLength, options.maxModelLen ?? info.contextLength);
  const servedModelNames = options.servedModelNames ?? [options.modelId ?? options.dir];
  const policy = new WorkerPolicy(servedModelNames[0], worker);
  let server: OpenAIServer;
  const adapters: ServedAdapter[] = [];
  try {
    for (const spec of options.adapters ?? []) {
      const { adapter, line } = await describeAdapter(spec);
      adapters.push(adapter);
      options.log?.(line);
    }
    // The server tokenizes /v1/completions string prompts itself (bounded by its prompt cap) to
    // check them against the context before they reach the worker.
    const tokenizer = await loadTokenizer(options.dir);
    server = await createOpenAIServer({
      policy,
      tokenizer,
      servedModelNames,
      adapters,
      host: options.host ?? "127.0.0.1",
      port: options.port ?? 8000,
      ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
      maxConcurrency,
      ...(options.maxQueue !== undefined ? { maxQueue: options.maxQueue } : {}),
      contextLength,
      vocabSize: info.vocabSize,
      ...(options.maxTokensLimit !== undefined ? { maxTokensLimit: options.maxTokensLimit } : {}),
      ...(options.log ? { log: options.log } : {}),
      ...(options.warn ? { warn: options.warn } : {}),
    });
  } catch (err) {
    await worker.terminate();
    throw err;
  }
  return {
    server,
    info: { ...info, contextLength },
    adapters,
    cancelled: () => policy.cancelledCount,
    close: async () => {
      await server.close();
      await worker.terminate();
    },
  };
}
