import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { ApiError } from "./api.ts";

export interface Loaded<T> {
  data: T | undefined;
  error: string | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * Load once, then every `intervalMs` while the tab is visible (0: load once). Polling, not a
 * socket: the console is a plain API client, and every call draws from the same api_default budget
 * a script would use, so pages poll at 10 s or slower.
 */
export function usePoll<T>(
  load: () => Promise<T>,
  intervalMs: number | ((latest: T | undefined) => number),
  deps: unknown[],
): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<string>();
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let latest: T | undefined;
    const run = async () => {
      try {
        const value = await loadRef.current();
        latest = value;
        if (!alive) return;
        setData(value);
        setError(undefined);
      } catch (e) {
        if (!alive) return;
        setError(e instanceof ApiError ? e.problem.message : String(e));
      } finally {
        if (alive) setLoading(false);
      }
      const every = typeof intervalMs === "function" ? intervalMs(latest) : intervalMs;
      if (alive && every > 0) {
        timer = setTimeout(function again() {
          if (document.hidden) timer = setTimeout(again, 1000);
          else void run();
        }, every);
      }
    };
    setLoading(true);
    void run();
    return () => {
      alive = false;
      if (timer) clearTimeout(timer);
    };
  }, [...deps, tick]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

/** View state kept in the URL so every view and filter can be shared and bookmarked. */
export function useUrlState(): [Record<string, string>, (patch: Record<string, string | undefined>) => void] {
  const loc = useLocation();
  const set = useCallback(
    (patch: Record<string, string | undefined>) => {
      const qs = new URLSearchParams(location.search);
      for (const [k, v] of Object.entries(patch)) {
        if (v === undefined || v === "") qs.delete(k);
        else qs.set(k, v);
      }
      const s = qs.toString();
      loc.route(`${location.pathname}${s ? `?${s}` : ""}`, true);
    },
    [loc],
  );
  return [loc.query, set];
}

/** Run a write, keeping its error for the form to show next to the fields the API named. */
export function useAction(): {
  busy: boolean;
  error: ApiError | undefined;
  run: <T>(fn: () => Promise<T>) => Promise<T | undefined>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const run = useCallback(async <T>(fn: () => Promise<T>) => {
    setBusy(true);
    setError(undefined);
    try {
      return await fn();
    } catch (e) {
      setError(
        e instanceof ApiError
          ? e
          : new ApiError({ status: 0, code: "network", message: String(e), fields: {} }),
      );
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(undefined) };
}
