import type { Socket } from "node:net";
import { AppError } from "../kernel/errors.ts";
import { errorBody, errorStyleFor, JSONAPI_MEDIA_TYPE } from "./errors.ts";

/**
 * Errors Node's HTTP parser raises before Fastify sees a request (over-long request line or
 * headers, malformed framing). They still answer in the documented shape: the request line is
 * recovered from the raw bytes to pick JSON:API for /api/v2 and `{error, message}` elsewhere.
 */
export function clientErrorHandler(error: Error, socket: Socket): void {
  const err = error as Error & { code?: string; rawPacket?: unknown };
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const overflow = err.code === "HPE_HEADER_OVERFLOW";
  const timeout = err.code === "ERR_HTTP_REQUEST_TIMEOUT";
  const appError = overflow
    ? new AppError(
        431,
        "header_fields_too_large",
        "the request line or headers exceed the size limit",
        "Request header fields too large",
      )
    : timeout
      ? new AppError(408, "request_timeout", "the request was not received in time", "Request timeout")
      : new AppError(400, "bad_request", "the request could not be parsed as HTTP", "Bad request");
  const raw = Buffer.isBuffer(err.rawPacket) ? err.rawPacket : Buffer.alloc(0);
  const firstLine = raw.subarray(0, 2048).toString("latin1").split("\r\n")[0] ?? "";
  const path = /^[A-Z]+ (\S+)/.exec(firstLine)?.[1] ?? "";
  const style = errorStyleFor(path);
  const jsonapi = style === "jsonapi";
  const body = JSON.stringify(errorBody(style, appError));
  socket.end(
    `HTTP/1.1 ${appError.status} ${appError.title}\r\n` +
      `content-type: ${jsonapi ? JSONAPI_MEDIA_TYPE : "application/json; charset=utf-8"}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      "x-content-type-options: nosniff\r\n" +
      `connection: close\r\n\r\n${body}`,
  );
}
