/** A FIFO async mutex. PGlite has one connection, so transactions must not interleave. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();
  #queued = 0;

  /** Callers holding or waiting for the mutex (self-metrics: the PGlite queue depth). */
  get queued(): number {
    return this.#queued;
  }

  async acquire(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((resolve) => {
      release = resolve;
    });
    const prev = this.tail;
    this.tail = prev.then(() => next);
    this.#queued++;
    await prev;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#queued--;
      release();
    };
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }
}
