/**
 * Poll `fn` until it returns a truthy value, or fail naming `what`. Tests wait for outcomes,
 * never for fixed times, so they pass on a loaded machine.
 */
export async function waitFor<T>(
  fn: () => Promise<T | null | undefined | false>,
  what: string,
  ms = 30_000,
  everyMs = 200,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
