import { useState } from "preact/hooks";
import { api } from "../api.ts";
import { ErrorNote, Field } from "../components/Ui.tsx";
import { text, when } from "../format.ts";
import { useAction, usePoll } from "../hooks.ts";

interface AuthSettings {
  mode: "password" | "oidc" | "saml" | "proxy_jwt";
  available_modes: string[];
  proxy_jwt: {
    header: string;
    jwks_url: string | null;
    public_key_pem: string | null;
    issuer: string | null;
    audience: string | null;
  };
  oidc: {
    discovery_url: string | null;
    client_id: string | null;
    client_secret: { set: true } | null;
    scopes: string;
    redirect_uri: string;
  };
  saml: {
    metadata_url: string | null;
    metadata_xml: string | null;
    sp_entity_id: string;
    acs_url: string;
    sp_metadata_url: string;
    idp_entry_point: string | null;
    idp_certificates: number;
  };
  claim_mappings: { email: string; name: string; sub: string };
  updated_at: string;
  updated_by: string | null;
}

const MODES: { value: AuthSettings["mode"]; label: string }[] = [
  { value: "password", label: "Password only" },
  { value: "oidc", label: "Single sign-on: OpenID Connect" },
  { value: "saml", label: "Single sign-on: SAML 2.0" },
  { value: "proxy_jwt", label: "Gateway proxy (JWT)" },
];

const opt = (f: FormData, name: string): string | null => {
  const v = String(f.get(name) ?? "").trim();
  return v === "" ? null : v;
};

/** Settings → Authentication (spec 5): the instance's sign-in mode, driving /api/admin/auth-settings. */
export function Authentication() {
  const current = usePoll(() => api.get<AuthSettings>("/api/admin/auth-settings"), 0, []);
  const act = useAction();
  const [saved, setSaved] = useState(false);
  const [mode, setMode] = useState<string>();
  const s = current.data;
  if (!s) {
    return (
      <>
        <h1>Authentication</h1>
        <ErrorNote error={current.error} />
        {!current.error && <p>Loading…</p>}
      </>
    );
  }
  const shown = mode ?? s.mode;
  return (
    <>
      <h1>Authentication</h1>
      <p>
        How people sign in. A mode is switched on only when its settings work: the JWKS or the discovery
        document is fetched when you save. Accounts allowed local sign-in (administrators' by default) can
        always use <a href="/auth/local">/auth/local</a>.
      </p>
      {saved && (
        <div class="banner ok" role="status">
          <p>Saved. Sign-in now uses: {MODES.find((m) => m.value === s.mode)?.label}.</p>
        </div>
      )}
      <form
        class="form"
        onSubmit={async (e) => {
          e.preventDefault();
          setSaved(false);
          const f = new FormData(e.currentTarget);
          const body: Record<string, unknown> = {
            mode: String(f.get("mode")),
            claim_mappings: {
              email: String(f.get("claim_email") || "email"),
              name: String(f.get("claim_name") || "name"),
              sub: String(f.get("claim_sub") || "sub"),
            },
          };
          if (shown === "proxy_jwt") {
            body.proxy_jwt = {
              header: String(f.get("header") || "Authorization"),
              jwks_url: opt(f, "jwks_url"),
              public_key_pem: opt(f, "public_key_pem"),
              issuer: opt(f, "issuer"),
              audience: opt(f, "audience"),
            };
          }
          if (shown === "saml") {
            body.saml = { metadata_url: opt(f, "metadata_url"), metadata_xml: opt(f, "metadata_xml") };
          }
          if (shown === "oidc") {
            const secret = opt(f, "client_secret");
            body.oidc = {
              discovery_url: opt(f, "discovery_url"),
              client_id: opt(f, "client_id"),
              // Empty keeps the stored (write-only) secret.
              ...(secret ? { client_secret: secret } : {}),
              scopes: String(f.get("scopes") || "openid email profile"),
            };
          }
          const res = await act.run(() => api.put<AuthSettings>("/api/admin/auth-settings", body));
          if (res) {
            setSaved(true);
            setMode(undefined);
            current.reload();
          }
        }}
      >
        <ErrorNote error={act.error} />
        <Field label="Sign-in mode" name="mode" error={act.error}>
          <select id="f-mode" name="mode" value={shown} onChange={(e) => setMode(e.currentTarget.value)}>
            {MODES.map((m) => (
              <option key={m.value} value={m.value} disabled={!s.available_modes.includes(m.value)}>
                {m.label}
                {s.available_modes.includes(m.value) ? "" : " (not available in this version)"}
              </option>
            ))}
          </select>
        </Field>

        {shown === "oidc" && (
          <fieldset>
            <legend>OpenID Connect</legend>
            <p class="muted">
              Register this redirect URI at your identity provider: <code>{s.oidc.redirect_uri}</code>
            </p>
            <Field
              label="Discovery URL"
              name="discovery_url"
              error={act.error}
              hint="https://<idp>/.well-known/openid-configuration"
            >
              <input
                id="f-discovery_url"
                name="discovery_url"
                type="url"
                defaultValue={s.oidc.discovery_url ?? ""}
              />
            </Field>
            <Field label="Client id" name="client_id" error={act.error}>
              <input id="f-client_id" name="client_id" defaultValue={s.oidc.client_id ?? ""} />
            </Field>
            <Field
              label="Client secret"
              name="client_secret"
              error={act.error}
              hint={s.oidc.client_secret ? "A secret is stored; leave empty to keep it" : "Required"}
            >
              <input id="f-client_secret" name="client_secret" type="password" autoComplete="off" />
            </Field>
            <Field label="Scopes" name="scopes" error={act.error}>
              <input id="f-scopes" name="scopes" defaultValue={s.oidc.scopes} />
            </Field>
          </fieldset>
        )}

        {shown === "saml" && (
          <fieldset>
            <legend>SAML 2.0</legend>
            <p class="muted">
              Give your identity provider this service provider's metadata:{" "}
              <code>{s.saml.sp_metadata_url}</code> (entity id <code>{s.saml.sp_entity_id}</code>, assertion
              consumer service <code>{s.saml.acs_url}</code>).
            </p>
            <Field label="IdP metadata URL" name="metadata_url" error={act.error} hint="Read when you save">
              <input
                id="f-metadata_url"
                name="metadata_url"
                type="url"
                defaultValue={s.saml.metadata_url ?? ""}
              />
            </Field>
            <Field label="Or the IdP metadata (XML)" name="metadata_xml" error={act.error}>
              <textarea
                id="f-metadata_xml"
                name="metadata_xml"
                rows={4}
                defaultValue={s.saml.metadata_xml ?? ""}
              />
            </Field>
            {s.saml.idp_entry_point && (
              <p class="muted">
                In use: sign-on at <code>{s.saml.idp_entry_point}</code>, {s.saml.idp_certificates} signing
                certificate(s).
              </p>
            )}
          </fieldset>
        )}

        {shown === "proxy_jwt" && (
          <fieldset>
            <legend>Gateway proxy (JWT)</legend>
            <Field
              label="Header"
              name="header"
              error={act.error}
              hint="Authorization carries “Bearer <jwt>”; any other header the raw JWT"
            >
              <input id="f-header" name="header" defaultValue={s.proxy_jwt.header} />
            </Field>
            <Field label="JWKS URL" name="jwks_url" error={act.error} hint="Preferred; or a public key below">
              <input id="f-jwks_url" name="jwks_url" type="url" defaultValue={s.proxy_jwt.jwks_url ?? ""} />
            </Field>
            <Field label="Public key (PEM)" name="public_key_pem" error={act.error}>
              <textarea
                id="f-public_key_pem"
                name="public_key_pem"
                rows={4}
                defaultValue={s.proxy_jwt.public_key_pem ?? ""}
              />
            </Field>
            <Field
              label="Issuer (iss)"
              name="issuer"
              error={act.error}
              hint="Optional: required value of iss"
            >
              <input id="f-issuer" name="issuer" defaultValue={s.proxy_jwt.issuer ?? ""} />
            </Field>
            <Field
              label="Audience (aud)"
              name="audience"
              error={act.error}
              hint="Optional: required member of aud"
            >
              <input id="f-audience" name="audience" defaultValue={s.proxy_jwt.audience ?? ""} />
            </Field>
          </fieldset>
        )}

        {shown !== "password" && (
          <fieldset>
            <legend>Claim mappings</legend>
            <Field
              label="Email claim"
              name="claim_email"
              error={act.error}
              hint="Dot notation reaches nested claims"
            >
              <input id="f-claim_email" name="claim_email" defaultValue={s.claim_mappings.email} />
            </Field>
            <Field label="Name claim" name="claim_name" error={act.error}>
              <input id="f-claim_name" name="claim_name" defaultValue={s.claim_mappings.name} />
            </Field>
            <Field label="Subject claim (external id)" name="claim_sub" error={act.error}>
              <input id="f-claim_sub" name="claim_sub" defaultValue={s.claim_mappings.sub} />
            </Field>
          </fieldset>
        )}
        <button type="submit" class="primary" disabled={act.busy}>
          Save
        </button>
        <p class="muted">
          Last changed {when(s.updated_at)} by {text(s.updated_by)}.
        </p>
      </form>
    </>
  );
}
