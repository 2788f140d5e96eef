import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { request, whenRateLimited } from "../api.ts";
import { useMe } from "../session.ts";
import { applyTheme, storedTheme, type Theme } from "../theme.ts";

const NAV: Array<[string, string]> = [
  ["/", "Overview"],
  ["/devices", "Devices"],
  ["/checks", "Checks"],
  ["/alerts", "Alerts"],
  ["/logs", "Logs"],
  ["/traces", "Traces"],
  ["/otel-metrics", "Metrics"],
  ["/query", "Query"],
  ["/fleet", "Gateways & agents"],
  ["/rules", "Rules & notifications"],
  ["/dashboards", "Dashboards"],
  ["/settings", "Settings"],
];

function active(path: string, href: string): boolean {
  return href === "/" ? path === "/" : path === href || path.startsWith(`${href}/`);
}

async function signOut() {
  try {
    await request("DELETE", "/users/log-out");
  } finally {
    location.assign("/users/log-in");
  }
}

export function Layout(props: { children: ComponentChildren }) {
  const { path } = useLocation();
  const me = useMe();
  const [theme, setTheme] = useState<Theme>(storedTheme());
  const [limited, setLimited] = useState(0);
  const [menu, setMenu] = useState(false);

  useEffect(() => {
    whenRateLimited((s) => setLimited(s));
  }, []);
  useEffect(() => {
    if (limited <= 0) return;
    const t = setTimeout(() => setLimited((s) => Math.max(0, s - 1)), 1000);
    return () => clearTimeout(t);
  }, [limited]);
  useEffect(() => setMenu(false), [path]);

  const next: Theme = theme === "dark" ? "light" : "dark";
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <button
          type="button"
          class="menu-toggle"
          aria-expanded={menu}
          aria-controls="nav"
          onClick={() => setMenu(!menu)}
        >
          Menu
        </button>
        <a class="brand" href="/">
          netmon
        </a>
        <div class="spacer" />
        <button
          type="button"
          aria-label={`Switch to ${next} theme`}
          onClick={() => {
            applyTheme(next);
            setTheme(next);
          }}
        >
          {theme === "dark" ? "Light" : "Dark"} theme
        </button>
        <span class="who" title={me.user.email}>
          {me.user.display_name || me.user.email} <span class="muted">({me.role})</span>
        </span>
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <div class="shell">
        <nav id="nav" class={menu ? "side open" : "side"} aria-label="Main">
          <ul>
            {NAV.map(([href, label]) => (
              <li key={href}>
                <a href={href} aria-current={active(path, href) ? "page" : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          {limited > 0 && (
            <p class="banner warn" role="status">
              The request budget for this address is used up; updates resume in {limited} s.
            </p>
          )}
          {props.children}
        </main>
      </div>
    </>
  );
}
