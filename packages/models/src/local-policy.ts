// A rollout Policy backed by an in-process model: chat template → tokens → KV-cache generation,
// then the reply parsed with @kiln/rollout's Hermes tool-call parser (`<tool_call>` JSON blocks,
// Qwen2.5/Qwen3 style) and `<think>` split into reasoning_content.
import {
  type FinishReason,
  type GenerateParams,
  type Generation,
  type Message,
  type Policy,
  type TokenLogprob,
  type ScoreOptions,
  type TokenScores,
  type ToolSchema,
  assistantMessageFromText,
} from "@kiln/rollout";
import { BatchScheduler, type BatchSchedulerOptions, type SchedulerStats } from "./batch-scheduler.js";
import type { CausalLM } from "./causal-lm.js";
import { ChatTemplate } from "./chat-template.js";
import { GenerationError } from "./errors.js";
import { type GenerateOptions, type GenerationOutput, generateAsync } from "./generate.js";
import { scoreCompletionsAsync, scoreCompletionsTopKAsync } from "./score.js";
import type { Tokenizer } from "./tokenizer.js";

export interface LocalPolicyOptions {
  id?: string;
  model: CausalLM;
  tokenizer: Tokenizer;
  /** Default: the tokenizer's chat template. */
  chatTemplate?: ChatTemplate;
  /** Defaults merged under each call's params (e.g. `{ maxTokens: 256, temperature: 0.7 }`). */
  defaults?: GenerateParams;
  /** Extra options for the sampler not in GenerateParams (repetition penalty, stop token ids). */
  sampler?: Pick<GenerateOptions, "repetitionPenalty" | "stopTokenIds">;
  /**
   * Continuous batching of concurrent calls (BatchScheduler: its sequence cap, prefill chunk and KV byte
   * budget). Default on for models whose layers all use softmax attention; `false` runs each call alone.
   */
  batching?: BatchSchedulerOptions | false;
}

export class LocalPolicy implements Policy {
  readonly id: string;
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  readonly chatTemplate: ChatTemplate;
  /** The scheduler concurrent calls share, or null when batching is off (or the model cannot batch). */
  readonly scheduler: BatchScheduler | null;

  constructor(private readonly options: LocalPolicyOptions) {
    this.model = options.model;
    this.tokenizer = options.tokenizer;
    this.chatTemplate = options.chatTemplate ?? ChatTemplate.fromTokenizer(options.tokenizer);
    this.id = options.id ?? `local:${options.model.config.modelType}`;
    this.scheduler =
      options.batching === false || !options.model.supportsRaggedBatches
        ? null
        : new BatchScheduler(options.model, options.batching ?? {});
  }

  /** The batching scheduler's counters and KV memory (null without batching). */
  stats(): SchedulerStats | null {
    return this.scheduler?.stats() ?? null;
  }

  /** Token ids of the prompt the model continues for `messages`. */
  promptIds(messages: Message[], tools?: ToolSchema[], enableThinking?: boolean): number[] {
    const text = this.chatTemplate.render(messages, { tools, addGenerationPrompt: true, enableThinking });
    return this.tokenizer.encode(text);
  }

  async generate(messages: Message[], tools?: ToolSchema[], params: GenerateParams = {}): Promise<Generation> {
    const p = { ...this.options.defaults, ...params };
    const prompt = this.promptIds(messages, tools, p.enableThinking);
    return this.run(prompt, p, tools, true);
  }

  async complete(prompt: string | number[], params: GenerateParams = {}): Promise<Generation> {
    const p = { ...this.options.defaults, ...params };
    const ids = typeof prompt === "string" ? this.tokenizer.encode(prompt, { addSpecialTokens: true }) : prompt;
    return this.run(ids, p, undefined, false);
  }

  async score(
    messages: Message[],
    completion: string | number[],
    tools?: ToolSchema[],
    options: ScoreOptions = {},
  ): Promise<TokenScores> {
    const prompt = this.promptIds(messages, tools, this.options.defaults?.enableThinking);
    const tokenIds = typeof completion === "string" ? this.tokenizer.encode(completion) : [...completion];
    const item = { promptIds: prompt, completionIds: tokenIds };
    if (this.scheduler) {
      const r = await this.scheduler.score(item, { topLogprobs: options.topLogprobs });
      return { tokenIds, logprobs: r.logprobs, ...(r.top ? { top: r.top } : {}) };
    }
    if (options.topLogprobs !== undefined) {
      const r = await scoreCompletionsTopKAsync(this.model, [item], options.topLogprobs);
      return { tokenIds, logprobs: r.logprobs[0], top: r.top[0] };
    }
    const [logprobs] = await scoreCompletionsAsync(this.model, [item]);
    return { tokenIds, logprobs };
  }

  private async run(
    prompt: number[],
    p: GenerateParams,
    tools: ToolSchema[] | undefined,
    chat: boolean,
  ): Promise<Generation> {
    const startedAt = Date.now();
    const options = {
      ...this.options.sampler,
      temperature: p.temperature,
      topP: p.topP,
      topK: p.topK,
      minP: p.minP,
      maxNewTokens: p.maxTokens ?? 256,
      seed: p.seed ?? 0,
      stopStrings: p.stop,
      topLogprobs: p.topLogprobs,
      tokenizer: this.tokenizer,
    };
    const out = this.scheduler
      ? await this.scheduler.generate(prompt, { ...options, signal: p.signal })
      : (await generateAsync(this.model, [prompt], options))[0];
    const generation = toGeneration(out, this.tokenizer, {
      tools,
      parse: chat,
      logprobs: p.logprobs || p.topLogprobs !== undefined,
    });
    generation.timings = { startedAt, durationMs: Date.now() - startedAt };
    return generation;
  }
}

/** Turn a raw generation into rollout's Generation: parse tool calls and reasoning when `parse`. */
export function toGeneration(
  out: GenerationOutput,
  tokenizer: Tokenizer,
  options: { tools?: ToolSchema[]; parse?: boolean; logprobs?: boolean } = {},
): Generation {
  if (out.tokenIds.length !== out.logprobs.length)
    throw new GenerationError("toGeneration: tokenIds and logprobs differ in length");
  let message: Message = { role: "assistant", content: out.text };
  if (options.parse ?? true) message = assistantMessageFromText(out.text, { tools: options.tools }).message;
  let finishReason: FinishReason = out.finishReason;
  if (message.tool_calls && message.tool_calls.length > 0 && finishReason === "stop") finishReason = "tool_calls";
  const generation: Generation = {
    message,
    text: out.text,
    finishReason,
    promptTokenIds: out.promptIds,
    completionTokenIds: out.tokenIds,
  };
  if (options.logprobs) {
    generation.logprobs = out.tokenIds.map(
      (id, i): TokenLogprob => ({
        token: tokenizer.tokenText(id),
        tokenId: id,
        logprob: out.logprobs[i],
        ...(out.topLogprobs
          ? {
              top: out.topLogprobs[i].map((a) => ({
                token: tokenizer.tokenText(a.tokenId),
                tokenId: a.tokenId,
                logprob: a.logprob,
              })),
            }
          : {}),
      }),
    );
  }
  return generation;
}
