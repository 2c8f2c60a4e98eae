// A deterministic, seedable policy for tests, benchmarks and examples: a script writes the
// reply text; token ids come from a tokenizer and log-probs from a fixed hash of
// (position, previous token, token). `score` recomputes the same function, so sampled
// log-probs, in-process scores and scores over HTTP must all agree exactly. Pure.

import { type TextTokenizer, CharTokenizer } from "./char-tokenizer.js";
import { renderChatML } from "./chatml.js";
import { fnv1a32, mulberry32 } from "./seeds.js";
import type { GenerateParams, Generation, Message, Policy, TokenLogprob, TokenScores, ToolSchema } from "./types.js";

export interface ScriptContext {
  messages: Message[];
  tools: ToolSchema[];
  params: GenerateParams;
  /** Seeded from `params.seed`: the only source of randomness a script may use. */
  rng: () => number;
}

export interface ScriptedPolicyOptions {
  id?: string;
  /** Writes the raw reply text (tool calls included, in the model's own format). */
  script: (ctx: ScriptContext) => string;
  tokenizer?: TextTokenizer;
  /** Prompt rendering (default: renderChatML). */
  render?: (messages: readonly Message[], tools: readonly ToolSchema[]) => string;
  /** Artificial latency per generate call, in ms (benchmarks). */
  latencyMs?: number;
}

/** The log-prob the toy "model" assigns to `token` at `position` after `prev`. In [-3.05, -0.05). */
export function toyLogprob(position: number, prev: number, token: number): number {
  const h = fnv1a32(`${position}:${prev}:${token}`);
  return -(0.05 + ((h % 1000) / 1000) * 3);
}

export class ScriptedPolicy implements Policy {
  readonly id: string;
  readonly tokenizer: TextTokenizer;
  private readonly script: ScriptedPolicyOptions["script"];
  private readonly render: (messages: readonly Message[], tools: readonly ToolSchema[]) => string;
  private readonly latencyMs: number;

  constructor(options: ScriptedPolicyOptions) {
    this.id = options.id ?? "scripted";
    this.script = options.script;
    this.tokenizer = options.tokenizer ?? new CharTokenizer();
    this.render = options.render ?? ((m, t) => renderChatML(m, t));
    this.latencyMs = options.latencyMs ?? 0;
  }

  async generate(messages: Message[], tools: ToolSchema[] = [], params: GenerateParams = {}): Promise<Generation> {
    const startedAt = Date.now();
    const t0 = performance.now();
    if (this.latencyMs > 0) await new Promise((r) => setTimeout(r, this.latencyMs));
    const promptTokenIds = this.tokenizer.encode(this.render(messages, tools));
    const rng = mulberry32(params.seed ?? fnv1a32(JSON.stringify(messages)));
    const text = this.script({ messages, tools, params, rng });
    return this.finishText(text, promptTokenIds, params, startedAt, t0);
  }

  async score(messages: Message[], completion: string | number[], tools: ToolSchema[] = []): Promise<TokenScores> {
    const promptIds = this.tokenizer.encode(this.render(messages, tools));
    const tokenIds = typeof completion === "string" ? this.tokenizer.encode(completion) : [...completion];
    return { tokenIds, logprobs: this.logprobsAfter(promptIds, tokenIds) };
  }

  /** Raw continuation: filler text from the seeded generator (the toy has no language model). */
  async complete(prompt: string | number[], params: GenerateParams = {}): Promise<Generation> {
    const startedAt = Date.now();
    const t0 = performance.now();
    const promptTokenIds = typeof prompt === "string" ? this.tokenizer.encode(prompt) : [...prompt];
    const rng = mulberry32(params.seed ?? 0);
    const n = params.maxTokens ?? 16;
    let text = "";
    for (let i = 0; i < n; i++) text += "abcdefgh "[Math.floor(rng() * 9)];
    return this.finishText(text, promptTokenIds, params, startedAt, t0);
  }

  private logprobsAfter(promptIds: number[], tokenIds: number[]): number[] {
    return tokenIds.map((tok, i) => {
      const pos = promptIds.length + i;
      const prev = i > 0 ? tokenIds[i - 1] : (promptIds[promptIds.length - 1] ?? -1);
      return toyLogprob(pos, prev, tok);
    });
  }

  private finishText(
    text: string,
    promptTokenIds: number[],
    params: GenerateParams,
    startedAt: number,
    t0: number,
  ): Generation {
    let finishReason: Generation["finishReason"] = "stop";
    for (const stop of params.stop ?? []) {
      const at = stop === "" ? -1 : text.indexOf(stop);
      if (at >= 0) text = text.slice(0, at);
    }
    let ids = this.tokenizer.encode(text);
    if (params.maxTokens !== undefined && ids.length > params.maxTokens) {
      ids = ids.slice(0, params.maxTokens);
      text = this.tokenizer.decode(ids);
      finishReason = "length";
    }
    const lps = this.logprobsAfter(promptTokenIds, ids);
    const k = params.topLogprobs ?? 0;
    const logprobs: TokenLogprob[] | undefined =
      params.logprobs === false
        ? undefined
        : ids.map((id, i) => {
            const entry: TokenLogprob = { token: this.tokenizer.tokenText(id), tokenId: id, logprob: lps[i] };
            if (k > 0) {
              // Alternatives: the sampled token first, then neighbours with strictly lower log-probs.
              entry.top = Array.from({ length: k }, (_, j) => {
                const alt = j === 0 ? id : id + j;
                return { token: this.tokenizer.tokenText(alt), tokenId: alt, logprob: lps[i] - j * 0.5 };
              });
            }
            return entry;
          });
    return {
      message: { role: "assistant", content: text },
      text,
      finishReason,
      promptTokenIds,
      completionTokenIds: ids,
      ...(logprobs ? { logprobs } : {}),
      timings: { startedAt, durationMs: performance.now() - t0 },
    };
  }
}
