// A rollout Policy whose forward passes run in llama.cpp (node-llama-cpp, an optional dependency
// loaded with a dynamic import), on a GGUF that `exportModelToGguf` wrote. Prompts are rendered and
// tokenised by kiln (the same ids LocalPolicy feeds its model), llama.cpp evaluates and samples,
// and kiln decodes and parses the reply, so at temperature 0 both policies play the same episodes.
// LoRA adapters (GGUF LoRA files from `exportAdapterToGguf`) are swapped between rounds with
// `setAdapters` (several at once add their deltas, as an OPD chain's rounds do): only the llama.cpp
// context is recreated, the base weights stay loaded. llama.cpp samples without reporting
// log-probs; given `logprobsModel` (kiln's model with the same weights), asked-for log-probs are
// that model's raw log-probs of the sampled tokens, i.e. what LocalPolicy records.
import type { GenerateParams, Generation, Message, Policy, ToolSchema } from "@kiln/rollout";
import { ChatTemplate } from "./chat-template.js";
import { GenerationError, ModelsError } from "./errors.js";
import type { GenerationOutput } from "./generate.js";
import { toGeneration } from "./local-policy.js";
import type { CausalLM } from "./causal-lm.js";
import { scoreCompletionsAsync, scoreCompletionsTopKAsync } from "./score.js";
import type { Tokenizer } from "./tokenizer.js";

/** node-llama-cpp is not installed, or its prebuilt llama.cpp does not load here. */
export class LlamaCppUnavailableError extends ModelsError {}

// The parts of node-llama-cpp's API this module uses (typed here so the package does not need its types).
interface NlcSequence {
  evaluate(
    tokens: number[],
    options?: {
      temperature?: number;
      topK?: number;
      topP?: number;
      minP?: number;
      seed?: number;
      yieldEogToken?: boolean;
    },
  ): AsyncGenerator<number, void, undefined>;
  clearHistory(): Promise<void>;
}
interface NlcContext {
  getSequence(): NlcSequence;
  dispose(): Promise<void>;
}
interface NlcModel {
  createContext(options: {
    contextSize?: number;
    threads?: number;
    batchSize?: number;
    flashAttention?: boolean;
    experimentalKvCacheKeyType?: string;
    experimentalKvCacheValueType?: string;
    lora?: { adapters: { filePath: string; scale?: number }[] };
  }): Promise<NlcContext>;
  dispose(): Promise<void>;
}
/** A loaded node-llama-cpp `Llama` (the library handle). */
export interface LlamaCppHandle {
  loadModel(options: { modelPath: string; gpuLayers?: number }): Promise<NlcModel>;
}

let shared: Promise<LlamaCppHandle> | undefined;

/**
 * node-llama-cpp's llama.cpp on the CPU (`getLlama({ gpu: false, build: "never" })`: the prebuilt
 * binaries from npm, never a source build, nothing downloaded). Throws LlamaCppUnavailableError in
 * one line when the package is absent or its binary does not load.
 */
export function loadLlamaCpp(): Promise<LlamaCppHandle> {
  shared ??= (async () => {
    let mod: { getLlama(options: Record<string, unknown>): Promise<unknown> };
    try {
      // A variable specifier keeps bundlers from resolving the optional package at build time.
      const name = "node-llama-cpp";
      mod = await import(/* @vite-ignore */ name);
    } catch (e) {
      throw new LlamaCppUnavailableError(
        `llama.cpp unavailable: node-llama-cpp is not installed (npm install node-llama-cpp@3.21.1): ${oneLine(e)}`,
      );
    }
    try {
      return (await mod.getLlama({ gpu: false, build: "never", logLevel: "error" })) as LlamaCppHandle;
    } catch (e) {
      throw new LlamaCppUnavailableError(
        `llama.cpp unavailable: node-llama-cpp's prebuilt binary did not load: ${oneLine(e)}`,
      );
    }
  })();
  shared.catch(() => {
    shared = undefined;
  });
  return shared;
}

function oneLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split("\n")[0];
}

export interface LlamaCppPolicyOptions {
  /** The GGUF model (e.g. from `kiln export gguf`). */
  modelPath: string;
  /** kiln's tokenizer of the same model (renders and decodes; llama.cpp only sees ids). */
  tokenizer: Tokenizer;
  chatTemplate?: ChatTemplate;
  id?: string;
  /** A GGUF LoRA adapter to apply from the start. */
  adapter?: { path: string; scale?: number } | null;
  /** GGUF LoRA adapters applied together from the start (their deltas add); with `adapter`, it comes first. */
  adapters?: readonly { path: string; scale?: number }[];
  /**
   * kiln's model with the same weights as the GGUF (and adapters): when a call asks for log-probs
   * (`logprobs`, `topLogprobs`), they are this model's raw log-probs of the tokens llama.cpp sampled
   * (one teacher-forced forward), as LocalPolicy records them. Without it such calls are refused.
   */
  logprobsModel?: CausalLM;
  /** llama.cpp threads (default 1: the same as kiln's single-threaded CPU engine). */
  threads?: number;
  /** Context window in tokens (default 2048). */
  contextSize?: number;
  /**
   * KV cache storage (default "F32", as kiln's; llama.cpp's own default "F16" is faster and rounds
   * keys and values, so temperature-0 episodes can then differ from LocalPolicy's).
   */
  kvCacheType?: "F32" | "F16";
  /**
   * llama.cpp's flash attention (default false: on the CPU it computes in f16, which moves log-probs
   * by ~1e-3 on the agent model; without it and with an F32 cache they agree with kiln's to ~5e-6).
   */
  flashAttention?: boolean;
  defaults?: GenerateParams;
  /** Stop ids; default the tokenizer's eos. */
  stopTokenIds?: number[];
}

export class LlamaCppPolicy implements Policy {
  readonly id: string;
  readonly tokenizer: Tokenizer;
  readonly chatTemplate: ChatTemplate;
  private context: NlcContext | undefined;
  private seq: NlcSequence | undefined;
  private adapters: { path: string; scale: number }[];
  /** How many llama.cpp contexts were created (one per adapter change), for tests and logs. */
  contextsCreated = 0;
  /**
   * The one llama.cpp sequence serves one generation at a time: concurrent episodes (runEpisodes keeps
   * many in flight) queue here instead of clearing and evaluating the same sequence at once, which
   * left both waiting forever. Adapter changes queue too, so no run loses its context mid-generation.
   */
  private queue: Promise<unknown> = Promise.resolve();

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.queue.then(work, work);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private constructor(
    private readonly model: NlcModel,
    private readonly options: LlamaCppPolicyOptions,
  ) {
    this.tokenizer = options.tokenizer;
    this.chatTemplate = options.chatTemplate ?? ChatTemplate.fromTokenizer(options.tokenizer);
    this.id = options.id ?? `llama.cpp:${options.modelPath}`;
    this.adapters = [...(options.adapter ? [options.adapter] : []), ...(options.adapters ?? [])].map((a) => ({
      path: a.path,
      scale: a.scale ?? 1,
    }));
  }

  /** Load the GGUF into llama.cpp (CPU). */
  static async load(options: LlamaCppPolicyOptions): Promise<LlamaCppPolicy> {
    const llama = await loadLlamaCpp();
    const model = await llama.loadModel({ modelPath: options.modelPath, gpuLayers: 0 });
    return new LlamaCppPolicy(model, options);
  }

  /** Apply another GGUF LoRA (or none) from the next call on; the base model is not reloaded. */
  async setAdapter(adapter: { path: string; scale?: number } | null): Promise<void> {
    await this.setAdapters(adapter ? [adapter] : []);
  }

  /**
   * Apply these GGUF LoRAs together (deltas add: an OPD chain's rounds 1 … r on the base = the merged
   * round r) from the next call on; the base model is not reloaded. The same list again is a no-op.
   */
  setAdapters(adapters: readonly { path: string; scale?: number }[]): Promise<void> {
    return this.exclusive(() => this.applyAdapters(adapters));
  }

  private async applyAdapters(adapters: readonly { path: string; scale?: number }[]): Promise<void> {
    const next = adapters.map((a) => ({ path: a.path, scale: a.scale ?? 1 }));
    if (JSON.stringify(next) === JSON.stringify(this.adapters)) return;
    await this.context?.dispose();
    this.context = undefined;
    this.seq = undefined;
    this.adapters = next;
  }

  /** The GGUF LoRAs applied now, with their scales. */
  get activeAdapters(): readonly { path: string; scale: number }[] {
    return this.adapters;
  }

  private async sequence(): Promise<NlcSequence> {
    if (!this.context) {
      this.context = await this.model.createContext({
        contextSize: this.options.contextSize ?? 2048,
        threads: this.options.threads ?? 1,
        flashAttention: this.options.flashAttention ?? false,
        experimentalKvCacheKeyType: this.options.kvCacheType ?? "F32",
        experimentalKvCacheValueType: this.options.kvCacheType ?? "F32",
        ...(this.adapters.length > 0
          ? { lora: { adapters: this.adapters.map((a) => ({ filePath: a.path, scale: a.scale })) } }
          : {}),
      });
      this.contextsCreated++;
      this.seq = this.context.getSequence();
    }
    const seq = this.seq as NlcSequence;
    await seq.clearHistory();
    return seq;
  }

  promptIds(messages: Message[], tools?: ToolSchema[], enableThinking?: boolean): number[] {
    const text = this.chatTemplate.render(messages, { tools, addGenerationPrompt: true, enableThinking });
    return this.tokenizer.encode(text);
  }

  async generate(messages: Message[], tools?: ToolSchema[], params: GenerateParams = {}): Promise<Generation> {
    const p = { ...this.options.defaults, ...params };
    const ids = this.promptIds(messages, tools, p.enableThinking);
    return this.exclusive(() => this.run(ids, p, tools, true));
  }

  async complete(prompt: string | number[], params: GenerateParams = {}): Promise<Generation> {
    const p = { ...this.options.defaults, ...params };
    const ids = typeof prompt === "string" ? this.tokenizer.encode(prompt, { addSpecialTokens: true }) : prompt;
    return this.exclusive(() => this.run(ids, p, undefined, false));
  }

  private async run(
    prompt: number[],
    p: GenerateParams,
    tools: ToolSchema[] | undefined,
    chat: boolean,
  ): Promise<Generation> {
    const wantLogprobs = p.logprobs === true || p.topLogprobs !== undefined;
    if (wantLogprobs && !this.options.logprobsModel) {
      throw new GenerationError(
        "LlamaCppPolicy reports log-probs only with logprobsModel (kiln's model of the same weights); or score with LocalPolicy (policy.score)",
      );
    }
    const startedAt = Date.now();
    const maxTokens = p.maxTokens ?? 256;
    const stopIds = new Set(
      this.options.stopTokenIds ?? (this.tokenizer.eosTokenId !== null ? [this.tokenizer.eosTokenId] : []),
    );
    const seq = await this.sequence();
    const out: GenerationOutput = { promptIds: prompt, tokenIds: [], text: "", logprobs: [], finishReason: "length" };
    const temperature = p.temperature ?? 1;
    const sampling = {
      temperature,
      yieldEogToken: true,
      ...(temperature > 0 ? { topK: p.topK ?? 0, topP: p.topP ?? 1, minP: p.minP ?? 0, seed: p.seed ?? 0 } : {}),
    };
    // llama.cpp ends a run at any end-of-generation token; kiln stops only at `stopIds`, so a run
    // that ended on another one is continued from that token.
    let input = prompt;
    let done = false;
    while (!done) {
      for await (const token of seq.evaluate(input, sampling)) {
        p.signal?.throwIfAborted();
        out.tokenIds.push(token);
        out.logprobs.push(0);
        if (stopIds.has(token)) {
          out.finishReason = "stop";
          out.stoppedBy = token;
          done = true;
        } else if (p.stop?.length) {
          const text = this.tokenizer.decodeContinuation(prompt, out.tokenIds);
          const hit = p.stop
            .map((s) => [text.indexOf(s), s] as const)
            .filter(([i]) => i >= 0)
            .sort((a, b) => a[0] - b[0])[0];
          if (hit) {
            out.finishReason = "stop";
            out.stoppedBy = hit[1];
            out.text = text.slice(0, hit[0]);
            done = true;
          }
        }
        if (out.tokenIds.length >= maxTokens) done = true;
        if (done) break;
      }
      if (!done) {
        const last = out.tokenIds.at(-1);
        if (last === undefined) throw new GenerationError("llama.cpp ended a generation before its first token");
        input = [last];
      }
    }
    if (typeof out.stoppedBy !== "string") {
      const body = out.finishReason === "stop" ? out.tokenIds.slice(0, -1) : out.tokenIds;
      out.text = this.tokenizer.decodeContinuation(prompt, body);
    }
    const scorer = this.options.logprobsModel;
    if (wantLogprobs && scorer && out.tokenIds.length > 0) {
      const item = { promptIds: prompt, completionIds: out.tokenIds };
      if (p.topLogprobs !== undefined) {
        const r = await scoreCompletionsTopKAsync(scorer, [item], p.topLogprobs);
        out.logprobs = r.logprobs[0];
        out.topLogprobs = r.top[0].map((t) => t.tokenIds.map((tokenId, i) => ({ tokenId, logprob: t.logprobs[i] })));
      } else {
        out.logprobs = (await scoreCompletionsAsync(scorer, [item]))[0];
      }
    }
    const generation = toGeneration(out, this.tokenizer, { tools, parse: chat, logprobs: wantLogprobs });
    generation.timings = { startedAt, durationMs: Date.now() - startedAt };
    return generation;
  }

  /** Free the llama.cpp context and model. */
  async dispose(): Promise<void> {
    await this.context?.dispose();
    this.context = undefined;
    await this.model.dispose();
  }
}
