import { useState } from "preact/hooks";
import { api } from "../api.ts";
import { DataTable } from "../components/Table.tsx";
import { Badge, Card, Confirm, ErrorNote, Field } from "../components/Ui.tsx";
import { ago, text, when } from "../format.ts";
import { useAction, usePoll } from "../hooks.ts";
import { useCan, useMe } from "../session.ts";

type R = Record<string, unknown> & { id: string };

export function Settings() {
  const me = useMe();
  const admin = me.role === "admin";
  const can = useCan();
  const instance = usePoll(
    () => (admin ? api.get<Record<string, unknown>>("/api/admin/instance") : Promise.resolve(undefined)),
    0,
    [admin],
  );
  const health = usePoll(() => api.get<Record<string, unknown>>("/health"), 0, []);
  const i = instance.data;
  return (
    <>
      <h1>Settings</h1>
      <div class="grid">
        <Card title="API credentials" href="/settings/api-credentials">
          <p>Personal API tokens for scripts and tools (`Authorization: Bearer …`).</p>
        </Card>
        {admin && (
          <Card title="Users and roles" href="/settings/users">
            <p>Who can sign in, and what each role may do.</p>
          </Card>
        )}
        {can("settings.auth.manage") && (
          <Card title="Authentication" href="/settings/authentication">
            <p>
              How people sign in: passwords, single sign-on (OpenID Connect, SAML 2.0) or a gateway proxy's
              JWT.
            </p>
          </Card>
        )}
        <Card title="Instance">
          <dl class="kv">
            <dt>Version</dt>
            <dd>{text(i?.version ?? health.data?.version)}</dd>
            <dt>Database</dt>
            <dd>
              {text(
                i?.database_backend ??
                  (health.data?.database as Record<string, unknown> | undefined)?.backend,
              )}
            </dd>
            {i && (
              <>
                <dt>Database location</dt>
                <dd>{text(i.database_location)}</dd>
                <dt>Data directory</dt>
                <dd>{text(i.data_dir)}</dd>
                <dt>Node.js</dt>
                <dd>{text(i.node_version)}</dd>
                <dt>Embedded agent</dt>
                <dd>{i.embedded_agent ? "on" : "off"}</dd>
                <dt>Rate-limit store</dt>
                <dd>{text(i.rate_limit_store)}</dd>
                <dt>Up for</dt>
                <dd>{Math.round(Number(i.uptime_seconds) / 60)} min</dd>
              </>
            )}
          </dl>
          <p class="muted small">
            API documents: <a href="/api/v2/open_api">/api/v2/open_api</a>
            {admin && (
              <>
                , <a href="/api/admin/openapi">/api/admin/openapi</a>
              </>
            )}
          </p>
        </Card>
      </div>
    </>
  );
}

interface Created {
  id: string;
  token: string;
  name: string;
}

export function ApiCredentials() {
  const list = usePoll(() => api.get<R[]>("/api/v1/api-credentials"), 0, []);
  const act = useAction();
  const [created, setCreated] = useState<Created>();
  const [copied, setCopied] = useState(false);
  const [revoke, setRevoke] = useState<R>();
  return (
    <>
      <h1>API credentials</h1>
      <p>
        Tokens act as you, with your role's permissions — or fewer, if you limit them to a list of
        permissions. Use them as <code>Authorization: Bearer &lt;token&gt;</code>.
      </p>
      {created && (
        <div class="banner ok" role="status">
          <p>
            <strong>Token “{created.name}” created.</strong> Copy it now: it is shown only once.
          </p>
          <div class="token-row">
            <label for="new-token" class="sr-only">
              New token
            </label>
            <input id="new-token" readOnly value={created.token} onFocus={(e) => e.currentTarget.select()} />
            <button
              type="button"
              onClick={async () => {
                await navigator.clipboard?.writeText(created.token).catch(() => undefined);
                setCopied(true);
              }}
            >
              {copied ? "Copied" : "Copy"}
            </button>
            <button type="button" onClick={() => setCreated(undefined)}>
              Done
            </button>
          </div>
        </div>
      )}
      <form
        class="form inline"
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const f = new FormData(form);
          const body: Record<string, unknown> = { name: String(f.get("name") ?? "").trim() };
          const ttl = String(f.get("expires_in") ?? "");
          if (ttl) body.expires_in = ttl;
          const scopes = String(f.get("scopes") ?? "").trim();
          if (scopes) body.scopes = scopes.split(/[\s,]+/).filter(Boolean);
          const permissions = String(f.get("permissions") ?? "").trim();
          if (permissions) body.permissions = permissions.split(/[\s,]+/).filter(Boolean);
          const res = await act.run(() => api.post<Created>("/api/v1/api-credentials", body));
          if (res) {
            setCreated(res);
            setCopied(false);
            form.reset();
            list.reload();
          }
        }}
      >
        <h2>New token</h2>
        <ErrorNote error={act.error} />
        <Field label="Name" name="name" error={act.error}>
          <input id="f-name" name="name" required maxLength={100} placeholder="grafana, backup script…" />
        </Field>
        <Field label="Expires" name="expires_in" error={act.error}>
          <select id="f-expires_in" name="expires_in">
            <option value="30d">in 30 days</option>
            <option value="90d">in 90 days</option>
            <option value="365d">in a year</option>
            <option value="">never</option>
          </select>
        </Field>
        <Field
          label="Scopes"
          name="scopes"
          error={act.error}
          hint="Optional, e.g. read mcp; empty: all of your permissions"
        >
          <input id="f-scopes" name="scopes" />
        </Field>
        <Field
          label="Limit to permissions"
          name="permissions"
          error={act.error}
          hint="Optional, e.g. devices.view devices.export; empty: everything you may do"
        >
          <input id="f-permissions" name="permissions" />
        </Field>
        <button type="submit" class="primary" disabled={act.busy}>
          Create token
        </button>
      </form>
      <h2>Your tokens</h2>
      <ErrorNote error={list.error} />
      <Confirm
        open={revoke !== undefined}
        title={`Revoke “${text(revoke?.name)}”?`}
        confirmLabel="Revoke"
        danger
        onCancel={() => setRevoke(undefined)}
        onConfirm={() => {
          const r = revoke;
          setRevoke(undefined);
          if (r)
            void act.run(async () => {
              await api.del(`/api/v1/api-credentials/${r.id}`);
              list.reload();
            });
        }}
      >
        <p>Anything using it stops working at once.</p>
      </Confirm>
      <DataTable
        caption="Your API tokens"
        rows={list.data}
        empty="No tokens yet."
        columns={[
          { key: "name", label: "Name" },
          { key: "scopes", label: "Scopes", render: (r) => text(r.scopes ?? "all") },
          {
            key: "permissions",
            label: "Can do",
            render: (r) => {
              const eff = (r.effective_permissions as string[] | undefined) ?? [];
              return r.permissions ? (
                <span title={eff.join(" ")}>{eff.join(", ") || "nothing (owner lacks them)"}</span>
              ) : (
                <span title={eff.join(" ")}>everything you may do ({eff.length})</span>
              );
            },
          },
          { key: "created_at", label: "Created", render: (r) => when(r.created_at ?? r.inserted_at) },
          { key: "last_used_at", label: "Last used", render: (r) => ago(r.last_used_at) },
          {
            key: "expires_at",
            label: "Expires",
            render: (r) => (r.expires_at ? when(r.expires_at) : "never"),
          },
          {
            key: "state",
            label: "State",
            render: (r) =>
              r.revoked_at ? <Badge value="disabled" label="revoked" /> : <Badge value="ok" label="active" />,
          },
          {
            key: "actions",
            label: "Actions",
            render: (r) =>
              r.revoked_at ? null : (
                <button type="button" class="small danger" onClick={() => setRevoke(r)}>
                  Revoke
                </button>
              ),
          },
        ]}
      />
    </>
  );
}

export function Users() {
  const can = useCan();
  const me = useMe();
  const users = usePoll(() => api.get<R[]>("/api/admin/users"), 0, []);
  const profiles = usePoll(() => api.get<R[] | { data: R[] }>("/api/admin/role-profiles"), 0, []);
  const act = useAction();
  if (me.role !== "admin") return <p>Only administrators manage users.</p>;
  const profileRows = Array.isArray(profiles.data) ? profiles.data : (profiles.data?.data ?? []);
  return (
    <>
      <h1>Users and roles</h1>
      <ErrorNote error={users.error ?? act.error} />
      <DataTable
        caption="Users"
        rows={users.data}
        columns={[
          { key: "email", label: "Email" },
          { key: "display_name", label: "Name" },
          { key: "role", label: "Role" },
          {
            key: "status",
            label: "Status",
            render: (r) => (
              <Badge value={r.status === "active" ? "ok" : "disabled"} label={String(r.status)} />
            ),
          },
          { key: "last_login_at", label: "Last sign-in", render: (r) => ago(r.last_login_at) },
          {
            key: "actions",
            label: "Actions",
            render: (r) =>
              r.id === me.user.id ? (
                <span class="muted">you</span>
              ) : (
                <button
                  type="button"
                  class="small"
                  onClick={() =>
                    act.run(async () => {
                      await api.post(
                        `/api/admin/users/${r.id}/${r.status === "active" ? "deactivate" : "reactivate"}`,
                      );
                      users.reload();
                    })
                  }
                >
                  {r.status === "active" ? "Deactivate" : "Reactivate"}
                </button>
              ),
          },
        ]}
      />
      {can("settings.rbac.manage") || me.role === "admin" ? (
        <details class="inline-form">
          <summary>New user</summary>
          <form
            class="form"
            onSubmit={async (e) => {
              e.preventDefault();
              const form = e.currentTarget;
              const f = new FormData(form);
              const body: Record<string, unknown> = {
                email: String(f.get("email") ?? "").trim(),
                role: String(f.get("role") ?? "viewer"),
              };
              const name = String(f.get("display_name") ?? "").trim();
              if (name) body.display_name = name;
              const pw = String(f.get("password") ?? "");
              if (pw) body.password = pw;
              const ok = await act.run(() => api.post("/api/admin/users", body));
              if (ok) {
                form.reset();
                users.reload();
              }
            }}
          >
            <Field label="Email" name="email" error={act.error}>
              <input id="f-email" name="email" type="email" required />
            </Field>
            <Field label="Name" name="display_name" error={act.error}>
              <input id="f-display_name" name="display_name" />
            </Field>
            <Field label="Role" name="role" error={act.error}>
              <select id="f-role" name="role">
                <option value="viewer">viewer</option>
                <option value="operator">operator</option>
                <option value="admin">admin</option>
              </select>
            </Field>
            <Field label="Password" name="password" error={act.error} hint="At least 12 characters">
              <input id="f-password" name="password" type="password" autoComplete="new-password" />
            </Field>
            <button type="submit" class="primary" disabled={act.busy}>
              Create user
            </button>
          </form>
        </details>
      ) : null}
      <h2>Role profiles</h2>
      <DataTable
        caption="Role profiles"
        rows={profileRows}
        empty="No custom role profiles; the built-in roles apply."
        columns={[
          { key: "name", label: "Name" },
          { key: "description", label: "Description" },
          {
            key: "permissions",
            label: "Permissions",
            render: (r) =>
              text(Array.isArray(r.permissions) ? `${r.permissions.length} permissions` : r.permissions),
          },
        ]}
      />
    </>
  );
}
