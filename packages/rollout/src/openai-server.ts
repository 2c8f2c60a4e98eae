// An OpenAI-compatible HTTP server for any Policy (`kiln serve` is built on it):
//   POST /v1/chat/completions  tools, n, seed, logprobs/top_logprobs, stream (SSE), return_token_ids
//   POST /v1/completions       raw prompts; echo + logprobs through Policy.score, continuation through Policy.complete
//   GET  /v1/models, GET /health
// A server people can leave running: requests are validated (every client mistake is a 4xx
// with an OpenAI error body); bodies, prompts and max_tokens are capped (defaults from the
// model's context length); at most `maxConcurrency` requests run at once and at most `maxQueue`
// wait, each for at most `maxQueueWaitMs` (beyond that: 429 / 503); generation is cancelled
// (AbortSignal) when the client disconnects, and streamed as the policy produces text;
// silent and slow sockets are closed by idle/header/body timeouts, connections are capped per
// client and in all, and a flood of them cannot lock out /health; an optional API key
// (Bearer) guards /v1. The server never generates on its own: a policy that computes on the
// event loop blocks it, so `kiln serve` runs the model in a worker thread. Binds 127.0.0.1
// unless told otherwise. Node only (node:http).
//
// This file starts the node:http server; the concerns live in ./server/: options (defaults and
// bounds), connections (caps and socket timeouts), routing (dispatch, auth, models, errors),
// validation, admission (the slot queue), generation (Policy calls → response bodies),
// streaming (SSE) and http (bodies, JSON, the error type).

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Admission, type AdmissionStats } from "./server/admission.js";
import { ConnectionGuard, type ConnectionStats } from "./server/connections.js";
import { type OpenAIServerOptions, resolveServerConfig } from "./server/options.js";
import { createRequestHandler } from "./server/routing.js";

export type { AdmissionStats } from "./server/admission.js";
export type { ConnectionStats } from "./server/connections.js";
export type { OpenAIServerOptions, ServedAdapter } from "./server/options.js";

export interface OpenAIServer {
  /** Base URL, e.g. "http://127.0.0.1:53211" (clients append /v1/...). */
  url: string;
  port: number;
  host: string;
  /** Requests running / waiting / answered / refused for lack of a slot. */
  stats(): AdmissionStats;
  /** Open connections, and those evicted, refused or timed out by the connection limits. */
  connectionStats(): ConnectionStats;
  close(): Promise<void>;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost", "::ffff:127.0.0.1"]);

export async function createOpenAIServer(options: OpenAIServerOptions): Promise<OpenAIServer> {
  const config = resolveServerConfig(options);
  const admission = new Admission(config.maxConcurrency, config.maxQueue, config.maxQueueWaitMs);
  const limits = config.connections;
  const server: Server = createServer({
    // node's own header deadline only backs up the connection guard's: two sweeps later, so the guard (which
    // answers 408 and counts the timeout in connectionStats) is the one that acts, also when timers run late.
    headersTimeout: Math.min(limits.headersTimeoutMs + 2 * limits.checkIntervalMs, config.requestTimeoutMs),
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
  });
  // Generation can take longer than any socket inactivity limit; slow clients are bounded by the
  // connection guard's deadlines instead, and the caps are the guard's (see server/connections.ts).
  server.setTimeout(0);
  const connectionGuard = new ConnectionGuard(server, limits);
  const handle = createRequestHandler(config, admission, connectionGuard);
  server.on("request", (req, res) => {
    connectionGuard.reading(req.socket);
    handle(req, res).catch(() => {
      if (!res.destroyed) res.destroy();
    });
  });
  // A client that vanishes mid-request must never take the server down.
  server.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    else socket.destroy();
  });
  const host = config.host;
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => {
      connectionGuard.close();
      reject(err);
    };
    server.once("error", onError);
    // A deep accept queue: a burst of connections beyond node's default 511 would otherwise have
    // the kernel drop SYNs, and every client (a /health probe too) wait out a 1 s retransmit.
    server.listen({ port: options.port ?? 0, host, backlog: 4096 }, () => {
      server.off("error", onError);
      resolve();
    });
  });
  if (!config.keyDigest && !LOOPBACK.has(host)) {
    config.warn(
      `kiln serve: listening on ${host} without an API key: anyone who can reach this address can use the model (set an API key, or bind 127.0.0.1)`,
    );
  }
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    host,
    stats: () => admission.stats(),
    connectionStats: () => connectionGuard.stats(),
    close: () =>
      new Promise<void>((resolve, reject) => {
        connectionGuard.close();
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
