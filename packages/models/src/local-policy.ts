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
import type { CausalLM } from "./causal-lm.js";
import { ChatTemplate } from "./chat-template.js";
import { GenerationError } from "./errors.js";
import { type GenerateOptions, type GenerationOutput, generate } from "./generate.js";
import { scoreCompletions, scoreCompletionsTopK } from "./score.js";
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
}

export class LocalPolicy implements Policy {
  readonly id: string;
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  readonly chatTemplate: ChatTemplate;

  constructor(private readonly options: LocalPolicyOptions) {
    this.model = options.model;
    this.tokenizer = options.tokenizer;
    this.chatTemplate = options.chatTemplate ?? ChatTemplate.fromTokenizer(options.tokenizer);
    this.id = options.id ?? `local:${options.model.config.modelType}`;
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
    if (options.topLogprobs !== undefined) {
      const r = scoreCompletionsTopK(this.model, [item], options.topLogprobs);
      return { tokenIds, logprobs: r.logprobs[0], top: r.top[0] };
    }
    const [logprobs] = scoreCompletions(this.model, [item]);
    return { tokenIds, logprobs };
  }

  private run(prompt: number[], p: GenerateParams, tools: ToolSchema[] | undefined, chat: boolean): Generation {
    const startedAt = Date.now();
    const [out] = generate(this.model, [prompt], {
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
    });
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
