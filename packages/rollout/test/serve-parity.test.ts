// What an OpenAI or vLLM client expects of the server: 404 model_not_found for a name it does not
// serve (its served name and aliases are accepted), /v1/models listing them with max_model_len and
// the adapters, streamed /v1/completions, and request validation that names the field (#31 item 9).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CharTokenizer,
  ScriptedPolicy,
  createOpenAIServer,
  type GenerateParams,
  type Generation,
  HttpPolicy,
  type OpenAIServer,
  type Policy,
  PolicyHttpError,
  RolloutConfigError,
} from "../src/index.js";

/** Continues any prompt with "abcdef…" (one letter per token, streamed piece by piece). */
class AlphabetPolicy implements Policy {
  readonly id = "alphabet";
  calls = 0;

  async generate(_messages: unknown, _tools?: unknown, params: GenerateParams = {}): Promise<Generation> {
    return this.run(params);
  }

  async complete(_prompt: string | number[], params: GenerateParams = {}): Promise<Generation> {
    return this.run(params);
  }

  private async run(params: GenerateParams): Promise<Generation> {
    this.calls++;
    const n = params.maxTokens ?? 16;
    let text = "";
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const piece = String.fromCharCode(97 + (i % 26));
      await new Promise((r) => setImmediate(r));
      params.onText?.(piece);
      text += piece;
      ids.push(97 + (i % 26));
    }
    let cut = text;
    for (const s of params.stop ?? []) if (s && cut.includes(s)) cut = cut.slice(0, cut.indexOf(s));
    return {
      message: { role: "assistant", content: cut },
      text: cut,
      finishReason: cut.length < text.length ? "stop" : "length",
      promptTokenIds: [1, 2],
      completionTokenIds: ids.slice(0, cut.length),
    };
  }
}

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

async function post(url: string, body: unknown) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: (text.startsWith("{") ? JSON.parse(text) : {}) as ErrorBody };
}

/** The `data:` events of an SSE body, parsed ([DONE] kept as the string). */
function events(sse: string): unknown[] {
  return sse
    .split("\n\n")
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice(6))
    .map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
}

let policy: AlphabetPolicy;
let server: OpenAIServer;
beforeAll(async () => {
  policy = new AlphabetPolicy();
  server = await createOpenAIServer({
    policy,
    tokenizer: new CharTokenizer(),
    servedModelNames: ["kiln/stories", "stories"],
    adapters: [{ id: "sft-step-60", path: "/runs/demo/sft/step-60", scale: 0.5 }],
    contextLength: 512,
    maxModelLen: 256,
  });
});
afterAll(() => server.close());

describe("served model names (vLLM --served-model-name)", () => {
  it("answers the served name and its aliases; any other name is a 404 model_not_found", async () => {
    const chat = (model: string) => ({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
    for (const name of ["kiln/stories", "stories"]) {
      const ok = await post(`${server.url}/v1/chat/completions`, chat(name));
      expect(ok.status, name).toBe(200);
      expect(JSON.parse(ok.text).model).toBe(name);
    }
    const before = policy.calls;
    const wrong = await post(`${server.url}/v1/chat/completions`, chat("gpt-4o"));
    expect(wrong.status).toBe(404);
    expect(wrong.json.error).toMatchObject({ type: "invalid_request_error", param: "model", code: "model_not_found" });
    expect(wrong.json.error.message).toMatch(/`gpt-4o` does not exist.*`kiln\/stories`, `stories`/);
    const wrongCompletion = await post(`${server.url}/v1/completions`, { model: "other", prompt: "x", max_tokens: 1 });
    expect(wrongCompletion.status).toBe(404);
    expect(policy.calls).toBe(before);
    // No model at all: the main served name answers, as vLLM's does.
    const unnamed = await post(`${server.url}/v1/completions`, { prompt: "x", max_tokens: 2 });
    expect(JSON.parse(unnamed.text).model).toBe("kiln/stories");
    // An evaluation client pointed at the wrong name fails loudly instead of scoring this model.
    const client = new HttpPolicy({ baseUrls: server.url, model: "qwen3-8b", retries: 0 });
    const err = await client.generate([{ role: "user", content: "hi" }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyHttpError);
    expect((err as PolicyHttpError).status).toBe(404);
  });

  it("/v1/models lists every served name with max_model_len and the adapters", async () => {
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
      data: { id: string; root: string; max_model_len: number; adapters: unknown[] }[];
    };
    expect(models.data.map((m) => m.id)).toEqual(["kiln/stories", "stories"]);
    for (const m of models.data) {
      expect(m.root).toBe("kiln/stories");
      expect(m.max_model_len).toBe(256);
      expect(m.adapters).toEqual([{ id: "sft-step-60", path: "/runs/demo/sft/step-60", scale: 0.5 }]);
    }
    const one = await fetch(`${server.url}/v1/models/stories`);
    expect(one.status).toBe(200);
    expect(((await one.json()) as { id: string }).id).toBe("stories");
    expect((await fetch(`${server.url}/v1/models/nope`)).status).toBe(404);
  });

  it("maxModelLen bounds prompt + max_tokens below the model's context", async () => {
    const over = await post(`${server.url}/v1/completions`, { prompt: "x".repeat(200), max_tokens: 100 });
    expect(over.status).toBe(400);
    expect(over.json.error.message).toMatch(/context length of 256/);
    expect((await post(`${server.url}/v1/completions`, { prompt: "x".repeat(200), max_tokens: 50 })).status).toBe(200);
  });

  it("refuses served names and context settings that cannot work", async () => {
    for (const bad of [
      { servedModelNames: [] },
      { servedModelNames: ["a", "a"] },
      { servedModelNames: [" "] },
      { servedModelNames: ["a"], modelId: "b" },
      { contextLength: 512, maxModelLen: 513 },
      { maxModelLen: 0 },
      { adapters: [{ id: "" }] },
    ]) {
      await expect(createOpenAIServer({ policy, ...bad }), JSON.stringify(bad)).rejects.toThrow(RolloutConfigError);
    }
  });
});

describe("streamed /v1/completions", () => {
  it("streams text_completion chunks as generated, then finish_reason, usage and [DONE]", async () => {
    const res = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        prompt: "Once",
        max_tokens: 12,
        stream: true,
        echo: true,
        stop: ["ijk"],
        stream_options: { include_usage: true },
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const all = events(await res.text());
    expect(all.at(-1)).toBe("[DONE]");
    const chunks = all.slice(0, -1) as {
      object: string;
      model: string;
      choices: { text: string; finish_reason: string | null }[];
      usage?: { completion_tokens: number };
    }[];
    expect(chunks.every((c) => c.object === "text_completion" && c.model === "kiln/stories")).toBe(true);
    const text = chunks.flatMap((c) => c.choices.map((ch) => ch.text)).join("");
    // The echo first, then the continuation cut before the stop string (never sent).
    expect(text).toBe("Onceabcdefgh");
    expect(chunks.filter((c) => c.choices.length > 0).length).toBeGreaterThan(4);
    expect(chunks.flatMap((c) => c.choices).at(-1)?.finish_reason).toBe("stop");
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(8);
  });

  it("n choices each finish; with logprobs each choice arrives whole with its log-probs", async () => {
    const two = events(
      await (
        await fetch(`${server.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ prompt: [5, 6], max_tokens: 3, stream: true, n: 2 }),
        })
      ).text(),
    ).slice(0, -1) as { choices: { index: number; text: string; finish_reason: string | null }[] }[];
    for (const index of [0, 1]) {
      const mine = two.flatMap((c) => c.choices).filter((c) => c.index === index);
      expect(mine.map((c) => c.text).join("")).toBe("abc");
      expect(mine.at(-1)?.finish_reason).toBe("length");
    }
    const withLogprobs = await post(`${server.url}/v1/completions`, {
      prompt: "x",
      max_tokens: 2,
      stream: true,
      logprobs: 0,
    });
    expect(withLogprobs.status).toBe(200);
    const lp = events(withLogprobs.text)[0] as { choices: { text: string; logprobs: { tokens: string[] } }[] };
    expect(lp.choices[0].text).toBe("ab");
    expect(lp.choices[0].logprobs.tokens).toHaveLength(2);
  });
});

describe("request validation as OpenAI and vLLM do it (#31 item 9)", () => {
  const tool = (parameters: unknown, name = "lookup") => ({
    type: "function",
    function: { name, description: "look something up", parameters },
  });
  const okTool = tool({ type: "object", properties: { q: { type: "string" } }, required: ["q"] });
  const chat = (extra: Record<string, unknown>) => ({ messages: [{ role: "user", content: "hi" }], ...extra });

  it("answers each invalid field with a 400 naming it, before any generation", async () => {
    const cases: [string, Record<string, unknown>, string, RegExp][] = [
      ["chat", chat({ tools: [tool({ type: "objekt" })] }), "tools.0.function.parameters", /type/],
      ["chat", chat({ tools: [tool({ type: "string" })] }), "tools.0.function.parameters", /type "object"/],
      [
        "chat",
        chat({ tools: [tool({ type: "object", properties: { q: { type: "strin" } } })] }),
        "tools.0.function.parameters",
        /properties\/q\/type/,
      ],
      [
        "chat",
        chat({ tools: [tool({ type: "object", properties: "q" })] }),
        "tools.0.function.parameters",
        /properties must be an object/,
      ],
      ["chat", chat({ tools: [tool({ type: "object", required: "q" })] }), "tools.0.function.parameters", /required/],
      [
        "chat",
        chat({ tools: [tool({ type: "object", properties: { q: { type: "string", pattern: "([" } } })] }),
        "tools.0.function.parameters",
        /pattern/,
      ],
      ["chat", chat({ tools: [okTool, okTool] }), "tools.1.function.name", /second function named "lookup"/],
      [
        "chat",
        chat({ tools: [okTool], tool_choice: { type: "function", function: { name: "missing" } } }),
        "tool_choice",
        /"missing", which is not among the tools \(lookup\)/,
      ],
      ["chat", chat({ tool_choice: "required" }), "tool_choice", /no tools/],
      // Forcing a call needs constrained decoding: refused by name rather than silently not enforced.
      ["chat", chat({ tools: [okTool], tool_choice: "required" }), "tool_choice", /not supported.*"auto".*"none"/],
      [
        "chat",
        chat({ tools: [okTool], tool_choice: { type: "function", function: { name: "lookup" } } }),
        "tool_choice",
        /naming a function is not supported/,
      ],
      ["chat", chat({ tools: [okTool], tool_choice: "sometimes" }), "tool_choice", /tool_choice/],
      ["chat", chat({ top_logprobs: 3 }), "top_logprobs", /needs logprobs: true/],
      ["chat", chat({ top_logprobs: 3, logprobs: false }), "top_logprobs", /needs logprobs: true/],
      ["chat", chat({ frequency_penalty: 50 }), "frequency_penalty", /2/],
      ["chat", chat({ presence_penalty: -2.5 }), "presence_penalty", /-2/],
      ["chat", chat({ frequency_penalty: 0.5 }), "frequency_penalty", /not supported/],
      ["chat", chat({ repetition_penalty: 0 }), "repetition_penalty", /0/],
      ["chat", chat({ logit_bias: { "5": 200 } }), "logit_bias.5", /100/],
      ["chat", chat({ response_format: { type: "json_schema" } }), "response_format", /not supported/],
      ["chat", chat({ stream_options: { include_usage: true } }), "stream_options", /stream is true/],
      ["completions", { prompt: "x", frequency_penalty: 3 }, "frequency_penalty", /2/],
      ["completions", { prompt: "x", best_of: 3 }, "best_of", /not supported/],
      ["completions", { prompt: "x", suffix: "end" }, "suffix", /not supported/],
      ["completions", { prompt: "x", logprobs: 21 }, "logprobs", /20/],
    ];
    const before = policy.calls;
    for (const [route, body, param, message] of cases) {
      const path = route === "chat" ? "/v1/chat/completions" : "/v1/completions";
      const r = await post(`${server.url}${path}`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error, JSON.stringify(body)).toMatchObject({ type: "invalid_request_error", param, code: "400" });
      expect(r.json.error.message, JSON.stringify(body)).toMatch(message);
    }
    expect(policy.calls).toBe(before);
  });

  it("accepts what OpenAI and vLLM accept", async () => {
    const fine: Record<string, unknown>[] = [
      chat({ tools: [okTool], tool_choice: "auto" }),
      chat({ tool_choice: "none" }),
      chat({ logprobs: true, top_logprobs: 2 }),
      chat({ frequency_penalty: 0, presence_penalty: 0, repetition_penalty: 1, logit_bias: {} }),
      chat({ response_format: { type: "text" }, user: "u1", parallel_tool_calls: true }),
      chat({
        tools: [
          tool({
            type: "object",
            properties: {
              items: { type: "array", items: { type: "object", properties: { id: { type: "integer", minimum: 0 } } } },
              mode: { anyOf: [{ type: "string", enum: ["a", "b"] }, { type: "null" }] },
              code: { type: "string", pattern: "^[A-Z]{3}$" },
            },
            required: ["items"],
            additionalProperties: false,
          }),
        ],
      }),
    ];
    for (const body of fine) {
      const r = await post(`${server.url}/v1/chat/completions`, { ...body, max_tokens: 2 });
      expect(r.status, `${JSON.stringify(body)} → ${r.text}`).toBe(200);
    }
  });
});

describe("tool_choice none and fields outside the API", () => {
  it("tool_choice none leaves the tools out and the reply unparsed; unknown fields are warned about once", async () => {
    const seen: number[] = [];
    const caller = new ScriptedPolicy({
      id: "caller",
      script: (ctx) => {
        seen.push(ctx.tools?.length ?? 0);
        return '<tool_call>\n{"name": "lookup", "arguments": {"q": "x"}}\n</tool_call>';
      },
    });
    const warnings: string[] = [];
    const srv = await createOpenAIServer({ policy: caller, warn: (l) => warnings.push(l) });
    try {
      const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];
      const ask = async (extra: Record<string, unknown>) =>
        (await post(`${srv.url}/v1/chat/completions`, {
          messages: [{ role: "user", content: "find x" }],
          tools,
          ...extra,
        })) as unknown as { status: number; text: string };
      const auto = JSON.parse((await ask({ tool_choice: "auto" })).text);
      expect(auto.choices[0].message.tool_calls[0].function.name).toBe("lookup");
      const none = JSON.parse((await ask({ tool_choice: "none", guided_json: { type: "object" } })).text);
      expect(none.choices[0].message.tool_calls).toBeUndefined();
      expect(none.choices[0].message.content).toContain("<tool_call>");
      expect(seen).toEqual([1, 0]);
      await ask({ guided_json: {}, ignore_eos: true });
      expect(warnings).toEqual([
        'request field(s) "guided_json" not supported; ignored (said once)',
        'request field(s) "ignore_eos" not supported; ignored (said once)',
      ]);
    } finally {
      await srv.close();
    }
  });
});
