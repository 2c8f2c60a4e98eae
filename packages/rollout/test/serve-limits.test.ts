// Regression tests for the server's limits in the unit that costs (#31 item 4), connection
// exhaustion (#31 item 5) and silent connections (#28): each failed on the tree before them.
import { connect, type Socket } from "node:net";
import { request as httpRequest } from "node:http";
import { describe, expect, it } from "vitest";
import {
  CharTokenizer,
  createOpenAIServer,
  type GenerateParams,
  type Generation,
  type Message,
  type Policy,
  PolicyRequestError,
  renderChatML,
} from "../src/index.js";

/**
 * A policy that templates and tokenizes its prompt on the spot (ChatML, one token per
 * character), as a model policy does, and refuses prompts beyond its context with a 400.
 */
class TemplatingPolicy implements Policy {
  readonly id = "templating";
  largestRequest = 0;
  private readonly tokenizer = new CharTokenizer();
  constructor(private readonly contextLength: number) {}

  async generate(messages: Message[], _tools?: unknown, params: GenerateParams = {}): Promise<Generation> {
    this.largestRequest = Math.max(this.largestRequest, messages.length);
    const prompt = this.tokenizer.encode(renderChatML(messages));
    if (prompt.length + (params.maxTokens ?? 16) > this.contextLength)
      throw new PolicyRequestError(`prompt of ${prompt.length} tokens exceeds the context`, "messages");
    const text = "ok".slice(0, params.maxTokens ?? 2);
    return { message: { role: "assistant", content: text }, text, finishReason: "length" };
  }
}

async function post(url: string, body: unknown) {
  const t0 = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { param: string | null; message: string } };
  return { status: res.status, json, ms: performance.now() - t0 };
}

describe("limits in the unit that costs (#31 item 4)", () => {
  it("refuses 120,000 empty messages in milliseconds, without delaying a concurrent 2-token request", async () => {
    const policy = new TemplatingPolicy(2048);
    const srv = await createOpenAIServer({ policy, contextLength: 2048, maxConcurrency: 1 });
    try {
      // 3.4 MB: under the 4 MiB body limit; no content at all, so a content-only cap let it through.
      const flood = JSON.stringify({ messages: Array(120_000).fill({ role: "user", content: "" }), max_tokens: 2 });
      expect(flood.length).toBeLessThan(4 * 1024 * 1024);
      const big = post(`${srv.url}/v1/chat/completions`, flood);
      const small = post(`${srv.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 2,
      });
      const [b, s] = await Promise.all([big, small]);
      expect(b.status).toBe(400);
      expect(b.json.error).toMatchObject({ param: "messages" });
      expect(b.json.error!.message).toMatch(/120000 messages; this server accepts at most 2048/);
      expect(s.status).toBe(200);
      // Never handed to the policy: nothing was templated or tokenized for it.
      expect(policy.largestRequest).toBe(1);
      // Milliseconds on an idle machine; the bounds leave room for a loaded one (the templating this
      // replaces took 3.3 s here, and the small request waited as long).
      expect(b.ms, "the refusal").toBeLessThan(3000);
      expect(s.ms, "the concurrent small request").toBeLessThan(3000);
    } finally {
      await srv.close();
    }
  });

  it("counts everything that reaches the chat template, not only message content", async () => {
    const policy = new TemplatingPolicy(1_000_000);
    const srv = await createOpenAIServer({ policy, contextLength: 512, maxConcurrency: 1 });
    try {
      // 400 messages with no content but tool calls: 8,192 characters of content cap, ~60 k templated.
      const call = (i: number) => ({
        id: `call_${i}`,
        type: "function",
        function: { name: "lookup", arguments: JSON.stringify({ query: "x".repeat(100) }) },
      });
      const messages = Array.from({ length: 400 }, (_, i) => ({
        role: "assistant",
        content: null,
        tool_calls: [call(i)],
      }));
      const r = await post(`${srv.url}/v1/chat/completions`, { messages, max_tokens: 2 });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ param: "messages" });
      expect(r.json.error!.message).toMatch(/messages and tools hold \d+ characters; this server accepts at most 8192/);
      // Tool schemas count too.
      const bigTool = {
        type: "function",
        function: { name: "t", parameters: { type: "object", description: "d".repeat(9000) } },
      };
      const t = await post(`${srv.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "hi" }],
        tools: [bigTool],
      });
      expect(t.status).toBe(400);
      expect(policy.largestRequest).toBe(0);
    } finally {
      await srv.close();
    }
  });
});

function health(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(`${url}/health`, { agent: false, timeout: 5000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(-1));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

/** Opens a socket that sends the start of a request, then one header byte every `everyMs`. */
function slowSocket(url: string, everyMs: number): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(port), hostname, () => {
      s.write("GET /v1/models HTTP/1.1\r\nhost: x\r\nx-slow: ");
      const timer = setInterval(() => (s.writable ? s.write("a") : clearInterval(timer)), everyMs);
      s.on("close", () => clearInterval(timer));
      resolve(s);
    });
    s.on("error", () => {});
  });
}

/** Resolves with the ms until the server closes a socket that `send` writes to (or sends nothing). */
function closedAfter(url: string, send: (s: Socket) => void = () => {}): Promise<{ ms: number; reply: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const t0 = performance.now();
    let reply = "";
    const s = connect(Number(port), hostname, () => send(s));
    s.on("data", (d) => {
      reply += d.toString();
    });
    s.on("error", () => {});
    s.on("close", () => resolve({ ms: performance.now() - t0, reply }));
  });
}

describe("connections (#31 item 5, #28)", () => {
  it("answers /health on every probe while 1,100 slow connections are open", async () => {
    const srv = await createOpenAIServer({ policy: new TemplatingPolicy(512) });
    const sockets: Socket[] = [];
    try {
      for (let i = 0; i < 1100; i += 100)
        sockets.push(...(await Promise.all(Array.from({ length: 100 }, () => slowSocket(srv.url, 500)))));
      await new Promise((r) => setTimeout(r, 200));
      const probes: number[] = [];
      for (let i = 0; i < 6; i++) probes.push(await health(srv.url));
      expect(probes).toEqual([200, 200, 200, 200, 200, 200]);
      // Room was made by closing the oldest of the slow sockets, which had sent no complete request.
      expect(srv.connectionStats().evicted).toBeGreaterThan(0);
      expect(srv.connectionStats().open).toBeLessThanOrEqual(256);
    } finally {
      for (const s of sockets) s.destroy();
      await srv.close();
    }
  });

  it("closes a connection that sends nothing within the default idle timeout", async () => {
    const srv = await createOpenAIServer({ policy: new TemplatingPolicy(512) });
    try {
      const silent = await closedAfter(srv.url);
      expect(silent.ms).toBeGreaterThan(4000);
      expect(silent.ms).toBeLessThan(8000);
    } finally {
      await srv.close();
    }
  }, 15_000);

  it("closes trickled headers and stalled bodies (408) at their deadlines", async () => {
    const srv = await createOpenAIServer({
      policy: new TemplatingPolicy(512),
      idleTimeoutMs: 400,
      headersTimeoutMs: 600,
      bodyTimeoutMs: 600,
      connectionsCheckingIntervalMs: 100,
    });
    try {
      const trickle = closedAfter(srv.url, (s) => {
        s.write("POST /v1/completions HTTP/1.1\r\nhost: x\r\n");
        const timer = setInterval(() => (s.writable ? s.write("x-a: 1\r\n") : clearInterval(timer)), 100);
        s.on("close", () => clearInterval(timer));
      });
      const stalledBody = closedAfter(srv.url, (s) =>
        s.write(
          "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        ),
      );
      const [t, b] = await Promise.all([trickle, stalledBody]);
      expect(t.ms).toBeLessThan(3000);
      expect(b.ms).toBeLessThan(3000);
      expect(b.reply).toMatch(/^HTTP\/1\.1 408/);
      expect(srv.connectionStats().timedOut).toBeGreaterThanOrEqual(2);
    } finally {
      await srv.close();
    }
  });

  it("caps connections per client: beyond the cap, one still waiting is closed, else the newcomer gets a 503", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const blocking: Policy = {
      id: "blocking",
      generate: async () => {
        await gate;
        return { message: { role: "assistant", content: "x" }, text: "x", finishReason: "stop" };
      },
    };
    const srv = await createOpenAIServer({ policy: blocking, maxConnectionsPerClient: 3, maxConcurrency: 8 });
    try {
      const idle = closedAfter(srv.url);
      await new Promise((r) => setTimeout(r, 50));
      const busy = Array.from({ length: 3 }, () =>
        post(`${srv.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }] }),
      );
      // The idle connection made room for the third request.
      expect((await idle).ms).toBeLessThan(2000);
      while (srv.stats().active < 3) await new Promise((r) => setTimeout(r, 10));
      const refused = await closedAfter(srv.url, (s) => s.write("GET /health HTTP/1.1\r\nhost: x\r\n\r\n"));
      expect(refused.reply).toMatch(/^HTTP\/1\.1 503/);
      expect(refused.reply).toMatch(/too many connections from this client \(limit 3\)/);
      release();
      expect((await Promise.all(busy)).map((r) => r.status)).toEqual([200, 200, 200]);
      expect(await health(srv.url)).toBe(200);
      expect(srv.connectionStats()).toMatchObject({ refused: 1 });
    } finally {
      release();
      await srv.close();
    }
  });
});
