// A bounded soak of the OpenAI-compatible server (#31): a server process on loopback under
// ordinary clients (chat and completions, streamed and not, every reply checked letter by letter),
// a few long generations, slow clients (trickled headers, stalled bodies, readers that stop
// reading) and floods (silent sockets, garbage bytes, oversized bodies, 120,000-message requests),
// while /health is probed on fresh connections. Prints the figures and asserts: no crash, no data
// lost, every /health probe answered, p99 and peak RSS bounded.
import { spawn } from "node:child_process";
import { request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const LOAD_MS = 10_000;

/** The soak policy's letter i for `seed` (fixtures/serve-soak-child.ts generates by the same rule). */
const soakLetter = (seed: number, i: number): string => String.fromCharCode(97 + ((seed + i) % 26));
const expected = (seed: number, n: number) => Array.from({ length: n }, (_, i) => soakLetter(seed, i)).join("");

interface Figures {
  requests: number;
  /** Answers other than 200 to ordinary clients, by status (429/503 are load shedding). */
  refused: Record<string, number>;
  /** A 200 whose text was not the policy's, or a stream that ended without [DONE]. */
  dataLost: number;
  /** Ordinary requests that failed at the transport (reset, closed early). */
  transportErrors: number;
  healthProbes: number;
  healthFailures: number;
  healthLatencies: number[];
  /** Latencies of ordinary requests of at most 24 tokens. */
  latencies: number[];
}

/** One HTTP request on its own connection: status and body. */
function call(url: string, path: string, body: unknown, onSocket?: (s: Socket) => void) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const data = typeof body === "string" ? body : JSON.stringify(body);
    const req = httpRequest(
      `${url}${path}`,
      {
        method: body === undefined ? "GET" : "POST",
        agent: false,
        headers:
          body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(data) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          text += d;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    if (onSocket) req.on("socket", onSocket);
    req.end(body === undefined ? undefined : data);
  });
}

/** Text of an SSE body (chat deltas or completion texts), and whether it ended with [DONE]. */
function streamed(sse: string): { text: string; done: boolean } {
  let text = "";
  let done = false;
  for (const event of sse.split("\n\n")) {
    if (!event.startsWith("data: ")) continue;
    const data = event.slice(6);
    if (data === "[DONE]") {
      done = true;
      continue;
    }
    const chunk = JSON.parse(data) as { choices: { delta?: { content?: string }; text?: string }[] };
    for (const c of chunk.choices) text += c.delta?.content ?? c.text ?? "";
  }
  return { text, done };
}

/** An ordinary client's request, checked against what the policy generates for it. */
async function ordinary(url: string, k: number, f: Figures, maxTokens = 1 + (k % 24)): Promise<void> {
  const seed = k % 1000;
  const kind = k % 4;
  const stream = kind % 2 === 1;
  const chat = kind < 2;
  const body = chat
    ? { model: "soak", messages: [{ role: "user", content: `hello ${k}` }], max_tokens: maxTokens, seed, stream }
    : { model: "soak", prompt: `count ${k}`, max_tokens: maxTokens, seed, stream };
  let r: { status: number; text: string };
  const t0 = performance.now();
  try {
    r = await call(url, chat ? "/v1/chat/completions" : "/v1/completions", body);
  } catch {
    f.transportErrors++;
    return;
  }
  f.requests++;
  if (maxTokens <= 24) f.latencies.push(performance.now() - t0);
  if (r.status !== 200) {
    f.refused[r.status] = (f.refused[r.status] ?? 0) + 1;
    return;
  }
  let text: string;
  if (stream) {
    const s = streamed(r.text);
    if (!s.done) f.dataLost++;
    text = s.text;
  } else {
    const json = JSON.parse(r.text) as { choices: { message?: { content: string }; text?: string }[] };
    text = json.choices[0].message?.content ?? json.choices[0].text ?? "";
  }
  if (text !== expected(seed, maxTokens)) f.dataLost++;
}

/** Keeps `count` sockets open that trickle a header byte every `everyMs` (reopened when closed) until `until`. */
function trickling(url: string, count: number, everyMs: number, until: () => boolean): Promise<void>[] {
  const { hostname, port } = new URL(url);
  const one = async () => {
    while (!until()) {
      await new Promise<void>((resolve) => {
        const s = connect(Number(port), hostname, () => {
          s.write("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: ");
          const timer = setInterval(() => (s.writable && !until() ? s.write("a") : s.destroy()), everyMs);
          s.on("close", () => clearInterval(timer));
        });
        s.on("error", () => {});
        s.on("close", () => resolve());
      });
    }
  };
  return Array.from({ length: count }, one);
}

/** A burst of sockets that each do `what` and are left for the server to close. */
function burst(url: string, count: number, what: (s: Socket) => void): Promise<void> {
  const { hostname, port } = new URL(url);
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve) => {
          const s = connect(Number(port), hostname, () => what(s));
          s.on("data", () => {});
          s.on("error", () => {});
          s.on("close", () => resolve());
          setTimeout(() => s.destroy(), 10_000).unref();
        }),
    ),
  ).then(() => {});
}

it("serve soak: slow clients, floods and long generations on loopback; no crash, no data lost, /health answered", async () => {
  const script = fileURLToPath(new URL("./fixtures/serve-soak-child.ts", import.meta.url));
  const root = fileURLToPath(new URL("../../..", import.meta.url));
  const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", script], {
    cwd: root,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const { url } = JSON.parse((await lines.next()).value as string) as { url: string };

  const f: Figures = {
    requests: 0,
    refused: {},
    dataLost: 0,
    transportErrors: 0,
    healthProbes: 0,
    healthFailures: 0,
    healthLatencies: [],
    latencies: [],
  };
  const clientLoop = monitorEventLoopDelay({ resolution: 10 });
  clientLoop.enable();
  const t0 = performance.now();
  const over = () => performance.now() - t0 > LOAD_MS;

  // /health on a fresh connection every 50 ms, each probe on its own (a slow one does not delay the next).
  const probes: Promise<void>[] = [];
  const health = (async () => {
    while (!over()) {
      const start = performance.now();
      probes.push(
        call(url, "/health", undefined)
          .catch(() => ({ status: -1, text: "" }))
          .then((r) => {
            f.healthProbes++;
            if (r.status !== 200) f.healthFailures++;
            f.healthLatencies.push(performance.now() - start);
          }),
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    await Promise.all(probes);
  })();
  let k = 0;
  const workers = Array.from({ length: 12 }, async () => {
    while (!over()) await ordinary(url, k++, f);
  });
  // A few long generations, streamed and not, checked in full.
  const long = [0, 1, 2].map((i) => ordinary(url, 1000 + i, f, 20_000 + i));
  const slow = trickling(url, 100, 300, over);
  // Readers that stop reading a long stream: the server gives up on them once they stall it.
  const stalledReaders = Array.from({ length: 2 }, (_, i) =>
    call(
      url,
      "/v1/chat/completions",
      { model: "soak", messages: [{ role: "user", content: "long" }], max_tokens: 30_000, seed: i, stream: true },
      (s) => {
        // Stop reading, then look again once the server has had time to give up.
        setTimeout(() => s.pause(), 50);
        setTimeout(() => s.resume(), 5000);
      },
    ).catch(() => null),
  );
  // The floods start once the server process has served for a second. Started together with the first ordinary
  // requests, the 150 silent sockets of a burst evicted ordinary connections the still-cold server had accepted
  // but not yet read (15 transport errors in about half the runs on a 2-vCPU host, all in the first ~130 ms):
  // eviction takes the oldest connection still waiting for its request. A server flooded from its first
  // milliseconds is a known gap, not what this soak measures.
  const floods = (async () => {
    await new Promise((r) => setTimeout(r, 1000));
    const huge = JSON.stringify({ model: "soak", messages: Array(120_000).fill({ role: "user", content: "" }) });
    while (!over()) {
      await Promise.all([
        burst(url, 150, () => {}), // silent
        burst(url, 20, (s) => s.write("\x00\xff GARBAGE \r\n\r\n")),
        burst(url, 10, (s) =>
          s.write(
            "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
          ),
        ), // stalled bodies
        burst(url, 5, (s) => s.write("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 50000000\r\n\r\n{")), // over the body limit
        call(url, "/v1/chat/completions", huge).catch(() => null), // 120,000 messages
      ]);
    }
  })();
  await Promise.all([health, ...workers, ...long, ...slow, floods, ...stalledReaders]);
  const loadMs = performance.now() - t0;
  clientLoop.disable();

  child.stdin.write("stop\n");
  const server = JSON.parse((await lines.next()).value as string) as {
    maxRssKiB: number;
    loopDelayMs: { p99: number; max: number };
    stats: { served: number };
    connections: { evicted: number; refused: number; timedOut: number };
  };
  const code = await exited;
  const crashes = code === 0 ? 0 : 1;
  const p99Of = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(0.99 * (values.length - 1))];
  const p99 = p99Of(f.healthLatencies);
  const ordinaryP99 = p99Of(f.latencies);
  const peakRssMiB = (server.maxRssKiB / 1024).toFixed(0);
  console.log(
    `serve soak (${(loadMs / 1000).toFixed(1)} s): requests ${f.requests} (answered in full ${server.stats.served}; ` +
      `refused ${JSON.stringify(f.refused)}; transport errors ${f.transportErrors}), crashes ${crashes}, ` +
      `data lost ${f.dataLost}, peak RSS ${peakRssMiB} MiB, /health p99 ${p99.toFixed(1)} ms over ` +
      `${f.healthProbes} probes (${f.healthFailures} failed; ordinary requests' p99 ${ordinaryP99.toFixed(1)} ms); connections evicted ${server.connections.evicted}, ` +
      `refused ${server.connections.refused}, timed out ${server.connections.timedOut}; server event-loop delay ` +
      `p99 ${server.loopDelayMs.p99.toFixed(0)} ms, max ${server.loopDelayMs.max.toFixed(0)} ms (the clients' ` +
      `${(clientLoop.percentile(99) / 1e6).toFixed(0)} / ${(clientLoop.max / 1e6).toFixed(0)} ms)`,
  );
  expect(crashes, stderr).toBe(0);
  expect(f.dataLost).toBe(0);
  expect(f.transportErrors).toBe(0);
  expect(f.refused).toEqual({});
  expect(f.requests).toBeGreaterThan(30);
  expect(f.healthFailures).toBe(0);
  expect(f.healthProbes).toBeGreaterThan(50);
  // Under 1 s on an idle machine; on a loaded one (many test files, other jobs) about what an
  // ordinary short request takes, which a starved /health would be far behind.
  expect(p99).toBeLessThan(Math.max(1000, 1.5 * ordinaryP99));
  expect(server.maxRssKiB / 1024).toBeLessThan(768);
  // The slow sockets and floods were closed by the server's deadlines and caps.
  expect(server.connections.timedOut).toBeGreaterThan(100);
}, 90_000);
