// An OpenAI-compatible HTTP server for any Policy (`kiln serve` is built on it):
//   POST /v1/chat/completions  tools, n, seed, logprobs/top_logprobs, stream (SSE), return_token_ids
//   POST /v1/completions       raw prompts; echo + logprobs through Policy.score, continuation through Policy.complete
//   GET  /v1/models, GET /health
// A server people can leave running: requests are validated (every client mistake is a 4xx
// with an OpenAI error body); bodies, prompts and max_tokens are capped (defaults from the
// model's context length); at most `maxConcurrency` requests run at once and at most `maxQueue`
// wait, each for at most `maxQueueWaitMs` (beyond that: 429 / 503); generation is cancelled
// (AbortSignal) when the client disconnects, and streamed as the policy produces text;
// slow or idle sockets are closed by header/request/keep-alive timeouts; an optional API key
// (Bearer) guards /v1. The server never generates on its own: a policy that computes on the
// event loop blocks it, so `kiln serve` runs the model in a worker thread. Binds 127.0.0.1
// unless told otherwise. Node only (node:http).
//
// This file starts the node:http server; the concerns live in ./server/: options (defaults and
// bounds), routing (dispatch, auth, errors), validation, admission (the slot queue), generation
// (Policy calls → response bodies), streaming (SSE) and http (bodies, JSON, the error type).

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Admission, type AdmissionStats } from "./server/admission.js";
import { type OpenAIServerOptions, resolveServerConfig } from "./server/options.js";
import { createRequestHandler } from "./server/routing.js";

export type { AdmissionStats } from "./server/admission.js";
export type { OpenAIServerOptions } from "./server/options.js";

export interface OpenAIServer {
  /** Base URL, e.g. "http://127.0.0.1:53211" (clients append /v1/...). */
  url: string;
  port: number;
  host: string;
  /** Requests currently running / waiting. */
  stats(): AdmissionStats;
  close(): Promise<void>;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost", "::ffff:127.0.0.1"]);

export async function createOpenAIServer(options: OpenAIServerOptions): Promise<OpenAIServer> {
  const config = resolveServerConfig(options);
  const admission = new Admission(config.maxConcurrency, config.maxQueue, config.maxQueueWaitMs);
  const handle = createRequestHandler(config, admission);
  const server: Server = createServer(
    {
      headersTimeout: options.headersTimeoutMs ?? 10_000,
      requestTimeout: options.requestTimeoutMs ?? 30_000,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 5_000,
      connectionsCheckingInterval: options.connectionsCheckingIntervalMs ?? 1_000,
    },
    (req, res) => {
      handle(req, res).catch(() => {
        if (!res.destroyed) res.destroy();
      });
    },
  );
  // Generation can take longer than any socket inactivity limit; slow clients are bounded by the
  // header and request timeouts above instead.
  server.setTimeout(0);
  server.maxConnections = options.maxConnections ?? 1024;
  // A client that vanishes mid-request must never take the server down.
  server.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    else socket.destroy();
  });
  const host = config.host;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
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
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
