import { describe, expect, it } from "vitest";
import { MemoryRateStore, RateLimiter } from "./rate-limit.ts";

describe("RateLimiter (sliding window, memory store)", () => {
  const budget = { requests: 3, windowSeconds: 60 };
  function limiterAt(start: number) {
    let now = start;
    const limiter = new RateLimiter(new MemoryRateStore(), () => new Date(now * 1000));
    return { limiter, advance: (s: number) => (now += s) };
  }

  it("allows `requests` hits per window, then denies without recording", async () => {
    const { limiter, advance } = limiterAt(1_000_000);
    const seen = [];
    for (let i = 0; i < 3; i++) {
      seen.push(await limiter.consume("b", "k", budget));
      advance(10);
    }
    expect(seen.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 2],
      [true, 1],
      [true, 0],
    ]);
    const denied = await limiter.consume("b", "k", budget);
    expect(denied.allowed).toBe(false);
    // Oldest hit at t0; now t0+30 → 30 s until it leaves the window.
    expect(denied.retryAfter).toBe(30);
    expect(denied.reset).toBe(1_000_030 + 60);
    // Denials are not recorded: once the oldest hit leaves, exactly one slot frees.
    advance(30);
    expect((await limiter.consume("b", "k", budget)).allowed).toBe(true);
    expect((await limiter.consume("b", "k", budget)).allowed).toBe(false);
  });

  it("slides: hits leave the window one by one", async () => {
    const { limiter, advance } = limiterAt(2_000_000);
    await limiter.consume("b", "k", budget);
    advance(20);
    await limiter.consume("b", "k", budget);
    await limiter.consume("b", "k", budget);
    advance(40); // first hit (60 s old) has left; the other two remain
    const d = await limiter.consume("b", "k", budget);
    expect(d.allowed).toBe(true);
    expect(d.remaining).toBe(0);
  });

  it("keys are independent and peek does not record", async () => {
    const { limiter } = limiterAt(3_000_000);
    for (let i = 0; i < 3; i++) await limiter.consume("b", "a", budget);
    expect((await limiter.consume("b", "a", budget)).allowed).toBe(false);
    expect((await limiter.consume("b", "other", budget)).allowed).toBe(true);
    for (let i = 0; i < 5; i++) expect((await limiter.peek("b", "p", budget)).allowed).toBe(true);
    expect((await limiter.peek("b", "p", budget)).count).toBe(0);
  });

  it("retry_after is at least 1", async () => {
    const { limiter, advance } = limiterAt(4_000_000);
    for (let i = 0; i < 3; i++) await limiter.consume("b", "k", budget);
    advance(60 - 1);
    expect((await limiter.consume("b", "k", budget)).retryAfter).toBe(1);
  });
});
