import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CharTokenizer,
  createOpenAIServer,
  GuessNumberEnv,
  guessNumberScript,
  HttpPolicy,
  type OpenAIServer,
  PolicyHttpError,
  renderChatML,
  runEpisodes,
  ScriptedPolicy,
  userMessage,
} from "../src/index.js";

const strip = (t: unknown) => JSON.parse(JSON.stringify(t, (k, v) => (k === "timings" ? undefined : v)));

function player(format: "hermes" | "qwen3.5", latencyMs = 0) {
  return new ScriptedPolicy({
    id: "bisect",
    script: guessNumberScript({ format, exploreRate: 0.3, malformedRate: 0.2 }),
    latencyMs,
  });
}

let server: OpenAIServer;
let server2: OpenAIServer;
beforeAll(async () => {
  server = await createOpenAIServer({
    policy: player("hermes"),
    tokenizer: new CharTokenizer(),
    maxBodyBytes: 64 * 1024,
  });
  server2 = await createOpenAIServer({ policy: player("hermes"), tokenizer: new CharTokenizer() });
});
afterAll(async () => {
  await server.close();
  await server2.close();
});

async function post(url: string, body: unknown, raw?: string) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: raw ?? JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

describe("in-process vs HTTP", () => {
  for (const format of ["hermes", "qwen3.5"] as const) {
    it(`same seed gives the same trajectory through kiln serve (${format})`, async () => {
      const srv = await createOpenAIServer({ policy: player(format), tokenizer: new CharTokenizer() });
      try {
        const local = await runEpisodes({
          makeEnv: () => new GuessNumberEnv(),
          policy: player(format),
          episodes: 12,
          baseSeed: 5,
        });
        const http = new HttpPolicy({ baseUrls: srv.url, model: "bisect", id: "bisect" });
        const remote = await runEpisodes({
          makeEnv: () => new GuessNumberEnv(),
          policy: http,
          episodes: 12,
          baseSeed: 5,
          concurrency: 4,
        });
        expect(remote.trajectories.map(strip)).toEqual(local.trajectories.map(strip));
        expect(remote.summary.byStatus.error ?? 0).toBe(0);
        expect(remote.summary.byStatus.done).toBeGreaterThan(0);
        // The run exercised malformed replies and tool calls, and carried tokens and log-probs.
        expect(local.summary.malformedReplies).toBeGreaterThan(0);
        const turn = remote.trajectories[0].turns[0];
        expect(turn.promptTokenIds!.length).toBeGreaterThan(100);
        expect(turn.logprobs!.length).toBe(turn.completionTokenIds!.length);
      } finally {
        await srv.close();
      }
    });
  }

  it("scores a completion identically in-process, over HTTP (echo), and as sampled", async () => {
    const local = player("hermes");
    const http = new HttpPolicy({
      baseUrls: server.url,
      model: "bisect",
      renderPrompt: renderChatML,
      tokenizer: new CharTokenizer(),
    });
    const messages = [userMessage("I picked a number between 1 and 100. Make a guess.")];
    const gen = await local.generate(messages, [], { seed: 3 });
    const a = await local.score(messages, gen.text);
    const b = await http.score(messages, gen.text);
    const c = await http.score(messages, gen.completionTokenIds!);
    expect(a.logprobs).toEqual(gen.logprobs!.map((l) => l.logprob));
    expect(b).toEqual(a);
    expect(c).toEqual(a);
    const vllmStyle = new HttpPolicy({
      baseUrls: server.url,
      model: "bisect",
      renderPrompt: renderChatML,
      tokenizer: new CharTokenizer(),
      scoring: "prompt_logprobs",
    });
    expect(await vllmStyle.score(messages, gen.text)).toEqual(a);
    expect(await vllmStyle.score(messages, gen.completionTokenIds!)).toEqual(a);
    await expect(new HttpPolicy({ baseUrls: server.url, model: "m" }).score(messages, "x")).rejects.toThrow(
      /renderPrompt/,
    );
  });

  it("returns n choices whose first equals the single sample", async () => {
    const http = new HttpPolicy({ baseUrls: server.url, model: "bisect" });
    const messages = [userMessage("I picked a number between 1 and 100. Make a guess.")];
    const many = await http.generateMany(messages, new GuessNumberEnv().tools(), { seed: 9, topLogprobs: 2 }, 4);
    const one = await http.generate(messages, new GuessNumberEnv().tools(), { seed: 9, topLogprobs: 2 });
    expect(many).toHaveLength(4);
    expect(strip(many[0])).toEqual(strip(one));
    expect(one.logprobs![0].top).toHaveLength(2);
    expect(new Set(many.map((g) => g.text)).size).toBeGreaterThan(1);
  });
});

describe("OpenAI-compatible server", () => {
  it("serves /health and /v1/models and binds to loopback by default", async () => {
    expect(server.host).toBe("127.0.0.1");
    expect(await (await fetch(`${server.url}/health`)).json()).toEqual({ status: "ok" });
    const models = await (await fetch(`${server.url}/v1/models`)).json();
    expect(models.data[0].id).toBe("bisect");
  });

  it("answers bad requests with OpenAI error bodies and keeps serving", async () => {
    const chat = `${server.url}/v1/chat/completions`;
    const bad = await post(chat, null, "{not json");
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/not valid JSON/);
    const invalid = await post(chat, { messages: [{ role: "wizard", content: "hi" }] });
    expect(invalid.status).toBe(400);
    expect(invalid.json.error.param).toBe("messages.0.role");
    const temp = await post(chat, { messages: [{ role: "user", content: "hi" }], temperature: 9 });
    expect(temp.json.error.param).toBe("temperature");
    const tooMany = await post(chat, { messages: [{ role: "user", content: "hi" }], n: 1000 });
    expect(tooMany.status).toBe(400);
    const big = await post(chat, { messages: [{ role: "user", content: "x".repeat(100_000) }] });
    expect(big.status).toBe(413);
    expect((await fetch(`${server.url}/v1/nope`)).status).toBe(404);
    expect((await fetch(chat)).status).toBe(405);
    const ok = await post(chat, { messages: [{ role: "user", content: "between 1 and 3" }], seed: 1 });
    expect(ok.status).toBe(200);
    expect(ok.json.choices[0].message.role).toBe("assistant");
  });

  it("cuts off an oversized chunked upload that declares no length", async () => {
    const url = new URL(server.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: "/v1/chat/completions",
          method: "POST",
          headers: { "transfer-encoding": "chunked" },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.write('{"messages": [{"role": "user", "content": "');
      for (let i = 0; i < 20; i++) req.write("y".repeat(8 * 1024)); // 160 KiB > the 64 KiB limit
      req.end('"}]}');
    });
    expect(status).toBe(413);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  it("survives clients that disconnect mid-upload and mid-stream", async () => {
    const url = new URL(server.url);
    // Mid-upload: promise a large body, send a little, then vanish.
    await new Promise<void>((resolve) => {
      const req = httpRequest({
        host: url.hostname,
        port: url.port,
        path: "/v1/chat/completions",
        method: "POST",
        headers: { "content-length": "5000", "content-type": "application/json" },
      });
      req.on("error", () => resolve());
      req.write('{"messages": [');
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 20);
    });
    // Mid-stream: read the first SSE chunk, then vanish.
    // A long reply streamed token by token, so the client leaves while the server is still writing.
    const long = new ScriptedPolicy({ id: "long", script: () => "word ".repeat(20_000) });
    const slow = await createOpenAIServer({ policy: long, tokenizer: new CharTokenizer() });
    const sseUrl = new URL(slow.url);
    const firstChunk = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        {
          host: sseUrl.hostname,
          port: sseUrl.port,
          path: "/v1/chat/completions",
          method: "POST",
          headers: { "content-type": "application/json" },
        },
        (res) => {
          res.once("data", (d: Buffer) => {
            req.destroy();
            resolve(d.toString());
          });
        },
      );
      req.on("error", reject);
      req.end(
        JSON.stringify({
          messages: [{ role: "user", content: "between 1 and 100" }],
          stream: true,
          logprobs: true,
          seed: 4,
        }),
      );
    });
    expect(firstChunk).toMatch(/^data: /);
    await new Promise((r) => setTimeout(r, 50));
    expect(await (await fetch(`${slow.url}/health`)).json()).toEqual({ status: "ok" });
    expect(slow.stats().active).toBe(0);
    expect(slow.stats().served).toBe(1);
    await slow.close();
    expect(await (await fetch(`${server.url}/health`)).json()).toEqual({ status: "ok" });
  });

  it("streams the same message it returns without streaming", async () => {
    const body = {
      messages: [{ role: "user", content: "between 1 and 100" }],
      seed: 8,
      logprobs: true,
      tools: new GuessNumberEnv().tools(),
    };
    const plain = await post(`${server.url}/v1/chat/completions`, body);
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const events = (await res.text())
      .split("\n\n")
      .filter((e) => e.startsWith("data: "))
      .map((e) => e.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    let content = "";
    let toolCalls: unknown[] = [];
    let finish = "";
    for (const c of chunks) {
      const d = c.choices[0]?.delta;
      if (d?.content) content += d.content;
      if (d?.tool_calls) toolCalls = d.tool_calls.map(({ index, ...tc }: { index: number }) => tc);
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    }
    const msg = plain.json.choices[0].message;
    expect(content).toBe(msg.content ?? "");
    expect(toolCalls).toEqual(msg.tool_calls ?? []);
    expect(finish).toBe(plain.json.choices[0].finish_reason);
    expect(chunks.at(-1).usage).toEqual(plain.json.usage);
  });

  it("implements completions with echo and log-probs", async () => {
    const r = await post(`${server.url}/v1/completions`, {
      prompt: "hello",
      echo: true,
      logprobs: 0,
      max_tokens: 3,
      seed: 1,
    });
    expect(r.status).toBe(200);
    const c = r.json.choices[0];
    expect(c.text.startsWith("hello")).toBe(true);
    expect(c.text).toHaveLength(8);
    expect(c.logprobs.tokens.join("")).toBe(c.text);
    expect(c.logprobs.token_logprobs[0]).toBeNull();
    expect(c.logprobs.text_offset).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const noTok = await createOpenAIServer({ policy: player("hermes") });
    const e = await post(`${noTok.url}/v1/completions`, { prompt: "hello", max_tokens: 0, echo: true, logprobs: 0 });
    expect(e.status).toBe(400);
    expect(e.json.error.message).toMatch(/no tokenizer/);
    await noTok.close();
  });

  it("turns a policy exception into a 500 error body and keeps serving", async () => {
    let calls = 0;
    const broken = {
      id: "broken",
      async generate() {
        calls++;
        throw new Error("CUDA out of memory");
      },
    };
    const srv = await createOpenAIServer({ policy: broken });
    const r = await post(`${srv.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }] });
    expect(r.status).toBe(500);
    expect(r.json.error).toMatchObject({ type: "server_error" });
    expect(r.json.error.message).toContain("CUDA out of memory");
    const http = new HttpPolicy({ baseUrls: srv.url, model: "broken", retries: 1, backoffMs: 1 });
    await expect(http.generate([userMessage("x")])).rejects.toThrow(/HTTP 500: internal error: CUDA out of memory/);
    expect(calls).toBe(3); // one direct request + two attempts by the client
    expect(srv.stats().active).toBe(0);
    expect((await fetch(`${srv.url}/health`)).status).toBe(200);
    await srv.close();
  });

  it("bounds concurrency and rejects beyond the queue with 429", async () => {
    const srv = await createOpenAIServer({ policy: player("hermes", 60), maxConcurrency: 2, maxQueue: 2 });
    const body = { messages: [{ role: "user", content: "between 1 and 100" }] };
    let peak = 0;
    const timer = setInterval(() => (peak = Math.max(peak, srv.stats().active)), 5);
    const results = await Promise.all(Array.from({ length: 8 }, () => post(`${srv.url}/v1/chat/completions`, body)));
    clearInterval(timer);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(4);
    expect(statuses.filter((s) => s === 429)).toHaveLength(4);
    expect(peak).toBeLessThanOrEqual(2);
    await srv.close();
  });
});

describe("HttpPolicy", () => {
  it("balances load across replicas and routes around a dead one", async () => {
    const before = [server.stats().served, server2.stats().served];
    const dead = "http://127.0.0.1:9"; // discard port: connection refused
    const http = new HttpPolicy({
      baseUrls: [dead, server.url, server2.url],
      model: "bisect",
      id: "bisect",
      backoffMs: 1,
      cooldownMs: 60_000,
    });
    const run = await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: http, episodes: 10, concurrency: 4 });
    expect(run.summary.byStatus.error ?? 0).toBe(0);
    const served = [server.stats().served - before[0], server2.stats().served - before[1]];
    expect(served[0]).toBeGreaterThan(0);
    expect(served[1]).toBeGreaterThan(0);
    expect(http.endpointStats()[0].failures).toBeGreaterThan(0);
  });

  it("retries 5xx with backoff and gives up with a typed error", async () => {
    let calls = 0;
    const sleeps: number[] = [];
    const flaky: typeof fetch = async (input, init) => {
      calls++;
      if (calls <= 2) return new Response(JSON.stringify({ error: { message: "overloaded" } }), { status: 503 });
      return fetch(input, init);
    };
    const http = new HttpPolicy({
      baseUrls: server.url,
      model: "bisect",
      fetch: flaky,
      sleep: async (ms) => void sleeps.push(ms),
      backoffMs: 100,
    });
    const gen = await http.generate([userMessage("between 1 and 9")], [], { seed: 1 });
    expect(gen.message.role).toBe("assistant");
    expect(calls).toBe(3);
    expect(sleeps).toHaveLength(2);
    expect(sleeps[1]).toBeLessThanOrEqual(200);

    const down: typeof fetch = async () => new Response("no", { status: 500 });
    const never = new HttpPolicy({
      baseUrls: server.url,
      model: "bisect",
      fetch: down,
      sleep: async () => {},
      retries: 2,
    });
    await expect(never.generate([userMessage("x")])).rejects.toThrow(/HTTP 500.*gave up after 3 attempts/);
    const bad: typeof fetch = async () =>
      new Response(JSON.stringify({ error: { message: "bad field" } }), { status: 400 });
    const noRetry = new HttpPolicy({ baseUrls: server.url, model: "bisect", fetch: bad, sleep: async () => {} });
    const err = await noRetry.generate([userMessage("x")]).catch((e) => e);
    expect(err).toBeInstanceOf(PolicyHttpError);
    expect(err.status).toBe(400);
    expect(err.message).toContain("bad field");
  });

  it("honours Retry-After on 429 (capped by maxBackoffMs)", async () => {
    let calls = 0;
    const sleeps: number[] = [];
    const busy: typeof fetch = async (input, init) => {
      if (++calls === 1) return new Response("{}", { status: 429, headers: { "retry-after": "2" } });
      return fetch(input, init);
    };
    const http = new HttpPolicy({
      baseUrls: server.url,
      model: "bisect",
      fetch: busy,
      sleep: async (ms) => void sleeps.push(ms),
      maxBackoffMs: 1500,
    });
    await http.generate([userMessage("between 1 and 9")], [], { seed: 1 });
    expect(sleeps).toEqual([1500]);
  });

  it("turns a timeout into a recorded episode error without stopping the batch", async () => {
    const slow = await createOpenAIServer({ policy: player("hermes", 400) });
    const http = new HttpPolicy({ baseUrls: slow.url, model: "bisect", timeoutMs: 100, retries: 0 });
    const fast = new HttpPolicy({ baseUrls: server.url, model: "bisect" });
    let n = 0;
    const mixed = {
      id: "mixed",
      generate: (...args: Parameters<HttpPolicy["generate"]>) =>
        n++ === 0 ? http.generate(...args) : fast.generate(...args),
    };
    const run = await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: mixed, episodes: 3, concurrency: 1 });
    expect(run.trajectories).toHaveLength(3);
    expect(run.trajectories[0].outcome.status).toBe("error");
    expect(run.trajectories[0].outcome.error!.message).toMatch(/timed out after 100 ms/);
    expect(run.trajectories.slice(1).every((t) => t.outcome.status !== "error")).toBe(true);
    await slow.close();
  });
});
