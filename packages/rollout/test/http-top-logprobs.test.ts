// Top-k teacher scoring over HTTP: HttpPolicy asks vLLM-style `prompt_logprobs: k`, kiln's
// OpenAI-compatible server answers with each position's k best tokens (ranked) plus the actual
// one, and the policy returns them as TokenScores.top, equal to the in-process scores.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CharTokenizer,
  HttpPolicy,
  type Generation,
  type Message,
  type OpenAIServer,
  PolicyCapabilityError,
  type Policy,
  type ScoreOptions,
  type TokenScores,
  createOpenAIServer,
  renderChatML,
  userMessage,
} from "../src/index.js";

/** A scorer whose distribution at position i depends on the previous token: deterministic, not uniform. */
class ToyScorer implements Policy {
  readonly id = "toy";
  async generate(): Promise<never> {
    throw new Error("not used");
  }
  /** The one token vLLM's scoring request generates (max_tokens 1), dropped by the scorer. */
  async complete(): Promise<Generation> {
    return {
      message: { role: "assistant", content: "x" },
      text: "x",
      finishReason: "length",
      completionTokenIds: [120],
    };
  }
  async score(
    _messages: Message[],
    completion: string | number[],
    _tools?: unknown,
    options: ScoreOptions = {},
  ): Promise<TokenScores> {
    const ids = typeof completion === "string" ? new CharTokenizer().encode(completion) : completion;
    const k = options.topLogprobs ?? 0;
    const logprobs: number[] = [];
    const top: { tokenIds: number[]; logprobs: number[] }[] = [];
    ids.forEach((id, i) => {
      const prev = i === 0 ? 0 : ids[i - 1];
      // Tokens prev+1, prev+2, … get probabilities 0.4, 0.2, 0.1, …; everything else shares the rest.
      const rank = (id - prev - 1 + 4096) % 4096;
      logprobs.push(rank < 8 ? Math.log(0.4 / 2 ** rank) : Math.log(1e-4));
      top.push({
        tokenIds: Array.from({ length: k }, (_, r) => (prev + 1 + r) % 4096),
        logprobs: Array.from({ length: k }, (_, r) => Math.log(0.4 / 2 ** r)),
      });
    });
    return k ? { tokenIds: [...ids], logprobs, top } : { tokenIds: [...ids], logprobs };
  }
}

let server: OpenAIServer;
beforeAll(async () => {
  server = await createOpenAIServer({ policy: new ToyScorer(), tokenizer: new CharTokenizer() });
});
afterAll(async () => {
  await server.close();
});

describe("top-k scoring over HTTP", () => {
  const messages = [userMessage("Guess a number.")];
  const completion = '<tool_call>{"name":"guess","arguments":{"n":50}}</tool_call>';

  it("returns each completion position's k best tokens, as the policy lists them", async () => {
    const http = new HttpPolicy({
      baseUrls: server.url,
      model: "toy",
      renderPrompt: renderChatML,
      tokenizer: new CharTokenizer(),
      scoring: "prompt_logprobs",
    });
    const remote = await http.score(messages, completion, [], { topLogprobs: 3 });
    const tok = new CharTokenizer();
    const prefix = tok.encode(renderChatML(messages, []));
    const ids = tok.encode(completion);
    const local = await new ToyScorer().score([], [...prefix, ...ids], undefined, { topLogprobs: 3 });
    expect(remote.tokenIds).toEqual(ids);
    expect(remote.top).toHaveLength(ids.length);
    for (let i = 0; i < ids.length; i++) {
      expect(remote.top![i].tokenIds).toEqual(local.top![prefix.length + i].tokenIds);
      expect(remote.top![i].logprobs[0]).toBeCloseTo(Math.log(0.4), 6);
      expect(remote.logprobs[i]).toBeCloseTo(local.logprobs[prefix.length + i], 6);
    }
    // Without topLogprobs the answer has no top lists.
    expect((await http.score(messages, completion)).top).toBeUndefined();
  });

  it("refuses top-k through echo scoring (alternatives come back as text there) and k outside [1, 20]", async () => {
    const echo = new HttpPolicy({ baseUrls: server.url, model: "toy", renderPrompt: renderChatML });
    await expect(echo.score(messages, completion, [], { topLogprobs: 2 })).rejects.toThrow(PolicyCapabilityError);
    const vllm = new HttpPolicy({
      baseUrls: server.url,
      model: "toy",
      renderPrompt: renderChatML,
      tokenizer: new CharTokenizer(),
      scoring: "prompt_logprobs",
    });
    await expect(vllm.score(messages, completion, [], { topLogprobs: 21 })).rejects.toThrow(/\[1, 20\]/);
  });
});
