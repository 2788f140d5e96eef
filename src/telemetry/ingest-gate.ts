import { ServiceUnavailableError } from "../kernel/errors.ts";

/**
 * Back-pressure for every telemetry receiver: a bound on the records being written at once.
 * A receiver takes a permit for a request's records before it writes and returns it when the
 * write settled. When the bound is reached the request is refused at once (HTTP 503 with
 * Retry-After, gRPC UNAVAILABLE, a syslog/trap datagram counted as refused) — a burst turns
 * into retries at the senders, never into an unbounded queue in this process or a silent drop
 * of something already acknowledged.
 */
export class IngestGate {
  #pending = 0;
  #refused = 0;

  constructor(readonly maxPending: number) {}

  get pending(): number {
    return this.#pending;
  }

  /** Requests refused for back-pressure since start (for logs and tests). */
  get refused(): number {
    return this.#refused;
  }

  /** Take `n` permits, or false when that would exceed the bound (one request may always run alone). */
  tryAcquire(n: number): boolean {
    if (this.#pending > 0 && this.#pending + n > this.maxPending) {
      this.#refused++;
      return false;
    }
    this.#pending += n;
    return true;
  }

  release(n: number): void {
    this.#pending = Math.max(0, this.#pending - n);
  }

  /** Run `fn` holding `n` permits; throws ServiceUnavailableError (503, Retry-After) when full. */
  async run<T>(n: number, fn: () => Promise<T>): Promise<T> {
    if (!this.tryAcquire(n)) throw overloaded();
    try {
      return await fn();
    } finally {
      this.release(n);
    }
  }
}

/** Seconds a refused sender should wait before retrying. */
export const RETRY_AFTER_SECONDS = 1;

export function overloaded(): ServiceUnavailableError {
  return new ServiceUnavailableError("telemetry ingest is at capacity; retry later", {
    code: "ingest_busy",
    headers: { "retry-after": String(RETRY_AFTER_SECONDS) },
    extra: { retry_after: RETRY_AFTER_SECONDS },
  });
}

/** The database refused or could not take the write: nothing was stored, the sender retries. */
export function storageUnavailable(cause: unknown): ServiceUnavailableError {
  return new ServiceUnavailableError("telemetry storage is unavailable; nothing was stored, retry later", {
    code: "storage_unavailable",
    headers: { "retry-after": "5" },
    extra: { retry_after: 5 },
    cause,
  });
}
