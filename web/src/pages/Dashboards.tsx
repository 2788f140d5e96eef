import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, api } from "../api.ts";
import { DashboardHost, type InstalledDashboard } from "../dashboards/runtime.ts";

/** Installed dashboard packages (enabled and verified), each opened at /dashboards/<route_slug>. */
export function Dashboards() {
  const [list, setList] = useState<InstalledDashboard[] | null>(null);
  const [error, setError] = useState<string>();
  useEffect(() => {
    api
      .get<{ data: InstalledDashboard[] }>("/api/v1/dashboards")
      .then((r) => setList(r.data))
      .catch((e) => setError(e instanceof ApiError ? e.problem.message : String(e)));
  }, []);
  return (
    <>
      <h1>Dashboards</h1>
      {error && <p class="error">{error}</p>}
      {list === null && !error && <p class="muted">Loading…</p>}
      {list && list.length === 0 && (
        <p>
          No dashboard packages are installed. Publish one with <code>netmon dashboard publish</code>, have it
          verified, and enable it; it then appears here. The <a href="/query">query explorer</a> charts any
          SRQL query meanwhile.
        </p>
      )}
      {list && list.length > 0 && (
        <ul class="dashboard-list">
          {list.map((d) => (
            <li key={d.id}>
              <a href={`/dashboards/${d.route_slug}`}>{d.name}</a>{" "}
              <span class="muted">
                {d.dashboard_id}@{d.version}
              </span>
              {d.description && <p class="muted">{d.description}</p>}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

/** One dashboard package mounted by the browser-module host; unmounting calls its destroy(). */
export function DashboardView(props: { slug?: string; params?: { slug?: string } }) {
  const slug = decodeURIComponent(props.params?.slug ?? props.slug ?? "");
  const rootRef = useRef<HTMLDivElement>(null);
  const [pkg, setPkg] = useState<InstalledDashboard | null>(null);
  const [error, setError] = useState<string>();

  useEffect(() => {
    setPkg(null);
    setError(undefined);
    let host: DashboardHost | null = null;
    let cancelled = false;
    api
      .get<{ data: InstalledDashboard }>(`/api/v1/dashboards/${encodeURIComponent(slug)}`)
      .then(async (r) => {
        if (cancelled || !rootRef.current) return;
        setPkg(r.data);
        host = new DashboardHost(r.data, rootRef.current);
        await host.mount();
      })
      .catch((e) => {
        if (!cancelled)
          setError(e instanceof ApiError ? e.problem.message : String((e as Error)?.message ?? e));
      });
    return () => {
      cancelled = true;
      host?.destroy();
    };
  }, [slug]);

  return (
    <>
      <h1>{pkg?.name ?? "Dashboard"}</h1>
      {pkg && (
        <p class="muted">
          {pkg.dashboard_id}@{pkg.version} · <a href="/dashboards">all dashboards</a>
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div id="dashboard-host" ref={rootRef} data-slug={slug} />
    </>
  );
}
