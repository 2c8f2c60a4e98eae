// Routing: one handler per request that authorizes, dispatches by path, validates before
// queueing, holds a slot while the policy works, and turns every failure into an OpenAI error
// (a JSON body, or an error event when a stream has already started).
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import {
  type ChatCompletionRequest,
  type CompletionRequest,
  chatCompletionRequestSchema,
  completionRequestSchema,
} from "../openai-wire.js";
import type { Admission } from "./admission.js";
import { chatCompletion, completion } from "./generation.js";
import { errorBody, HttpError, readBody, sendError, sendJson, toHttpError } from "./http.js";
import type { ServerConfig } from "./options.js";
import { streamChat, streamCompletion } from "./streaming.js";
import { checkChat, checkCompletion, precheckChat, unknownFields, validate } from "./validation.js";

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Where a connection's request stands, for the connection guard's deadlines and eviction. */
export interface ConnectionPhases {
  working(socket: Socket): void;
  answered(socket: Socket): void;
}

export function createRequestHandler(
  config: ServerConfig,
  admission: Admission,
  phases: ConnectionPhases,
): RequestHandler {
  const served = new Set(config.servedModelNames);
  /** The model a request names must be one this server serves (vLLM and OpenAI answer 404 otherwise). */
  const checkModel = (model: string | undefined): void => {
    if (model === undefined || served.has(model)) return;
    throw new HttpError(
      404,
      `The model \`${model}\` does not exist. This server serves ${config.servedModelNames.map((n) => `\`${n}\``).join(", ")}.`,
      "invalid_request_error",
      "model",
      "model_not_found",
    );
  };
  const authorized = (req: IncomingMessage): boolean => {
    if (!config.keyDigest) return true;
    const header = req.headers.authorization ?? "";
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (!m) return false;
    // Compare digests so the comparison takes the same time whatever the key's length.
    return timingSafeEqual(createHash("sha256").update(m[1].trim()).digest(), config.keyDigest);
  };

  // Fields outside the API are ignored, as vLLM and OpenAI's SDKs' extra fields are; said once per
  // field name, in the server's warnings, so an operator learns what clients expect of it.
  const warned = new Set<string>();
  const warnIgnored = (fields: string[]): void => {
    const fresh = fields.filter((f) => !warned.has(f) && warned.size < 256);
    for (const f of fresh) warned.add(f);
    if (fresh.length > 0)
      config.warn(
        `request field(s) ${fresh.map((f) => JSON.stringify(f)).join(", ")} not supported; ignored (said once)`,
      );
  };

  // vLLM's model card: every served name (aliases point at the first through `root`), the context
  // served, and — a kiln field — the adapters applied to the weights (they are part of every
  // served name, not models of their own).
  const models = () => ({
    object: "list",
    data: config.servedModelNames.map((name) => ({
      id: name,
      object: "model",
      created: 0,
      owned_by: "kiln",
      root: config.servedModelNames[0],
      parent: null,
      ...(config.contextLength !== undefined ? { max_model_len: config.contextLength } : {}),
      adapters: config.adapters.map((a) => ({
        id: a.id,
        ...(a.path !== undefined ? { path: a.path } : {}),
        ...(a.scale !== undefined ? { scale: a.scale } : {}),
      })),
    })),
  });

  return async (req, res) => {
    const t0 = performance.now();
    const path = (req.url ?? "/").split("?")[0];
    // Aborted when the client goes away before the response is complete: generation stops.
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      // /health first: no auth, no body, no slot (the connection guard keeps a socket free for it).
      if (req.method === "GET" && path === "/health") return sendJson(res, 200, { status: "ok" });
      if (path.startsWith("/v1/") && !authorized(req)) {
        req.resume();
        throw new HttpError(
          401,
          "missing or invalid API key (send Authorization: Bearer <key>)",
          "authentication_error",
        );
      }
      if (req.method === "GET" && path === "/v1/models") return sendJson(res, 200, models());
      const modelPath = /^\/v1\/models\/(.+)$/.exec(path);
      if (req.method === "GET" && modelPath) {
        const name = decodeURIComponent(modelPath[1]);
        checkModel(name);
        return sendJson(
          res,
          200,
          models().data.find((m) => m.id === name),
        );
      }
      const route = path === "/v1/chat/completions" ? "chat" : path === "/v1/completions" ? "completions" : null;
      if (!route) throw new HttpError(404, `no route ${req.method} ${path}`, "not_found_error");
      if (req.method !== "POST") throw new HttpError(405, `${path} accepts POST only`);
      const body = await readBody(req, config.maxBodyBytes);
      phases.working(req.socket);
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch (err) {
        throw new HttpError(400, `request body is not valid JSON: ${(err as Error).message}`);
      }
      // Validate before queueing: a bad request never waits for (or holds) a slot.
      if (route === "chat") precheckChat(config, json);
      const request =
        route === "chat"
          ? checkChat(config, validate(chatCompletionRequestSchema, json))
          : checkCompletion(config, validate(completionRequestSchema, json));
      checkModel(request.model);
      warnIgnored(unknownFields(route === "chat" ? chatCompletionRequestSchema : completionRequestSchema, json));
      await admission.acquire(abort.signal);
      try {
        if (route === "chat") {
          const chat = request as ChatCompletionRequest;
          if (chat.stream) await streamChat(config, chat, res, abort.signal);
          else sendJson(res, 200, await chatCompletion(config, chat, abort.signal));
        } else {
          const plain = request as CompletionRequest;
          if (plain.stream) await streamCompletion(config, plain, res, abort.signal);
          else sendJson(res, 200, await completion(config, plain, abort.signal));
        }
        admission.recordServed();
      } finally {
        admission.release();
      }
    } catch (err) {
      const e = toHttpError(err);
      if (abort.signal.aborted) {
        // The client is gone: nothing to answer.
      } else if (!res.headersSent && !res.destroyed) {
        sendError(res, e);
      } else if (!res.destroyed) {
        // Mid-stream failure: tell the client in the stream, then end it.
        res.end(`data: ${JSON.stringify(errorBody(e))}\n\ndata: [DONE]\n\n`);
      }
    } finally {
      if (!req.socket.destroyed) phases.answered(req.socket);
      config.log?.(`${req.method} ${path} ${res.statusCode} ${(performance.now() - t0).toFixed(1)}ms`);
    }
  };
}
