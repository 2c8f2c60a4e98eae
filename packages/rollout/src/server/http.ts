// The HTTP plumbing of the OpenAI-compatible server: its error type (every client mistake is an
// HttpError that becomes an OpenAI error body), JSON replies and bounded request bodies.
import type { IncomingMessage, ServerResponse } from "node:http";
import { PolicyRequestError } from "../errors.js";
import type { WireError } from "../openai-wire.js";

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = "invalid_request_error",
    readonly param: string | null = null,
    /** OpenAI's error code (e.g. "model_not_found"); default: the status. */
    readonly code: string = String(status),
  ) {
    super(message);
  }
}

/** Any failure as the HttpError it is answered with: a policy's refusal keeps its status, the rest are 500s. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof PolicyRequestError)
    return new HttpError(err.status, err.message, "invalid_request_error", err.param);
  return new HttpError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`, "server_error");
}

/** The OpenAI error body of an HttpError. */
export function errorBody(e: HttpError): WireError {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code } };
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Answers `e` as JSON, with the headers its status calls for. */
export function sendError(res: ServerResponse, e: HttpError): void {
  const headers: Record<string, string> = e.status === 429 || e.status === 503 ? { "retry-after": "1" } : {};
  if (e.status === 413) headers.connection = "close";
  if (e.status === 401) headers["www-authenticate"] = "Bearer";
  sendJson(res, e.status, errorBody(e), headers);
}

/** The request body as text; more than `limit` bytes (declared or sent) is a 413. */
export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new HttpError(413, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`));
      req.resume(); // drain so the socket can still carry the 413
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        reject(new HttpError(413, `request body exceeds the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!failed) resolve(Buffer.concat(chunks).toString("utf8"));
    });
    req.on("aborted", () => {
      failed = true;
      reject(new HttpError(400, "client aborted the request"));
    });
    req.on("error", (err) => {
      failed = true;
      reject(new HttpError(400, `request stream error: ${err.message}`));
    });
  });
}
