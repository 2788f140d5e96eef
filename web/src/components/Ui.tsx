import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";
import type { ApiError } from "../api.ts";

const TONES: Record<string, string> = {
  ok: "ok",
  success: "ok",
  healthy: "ok",
  connected: "ok",
  active: "bad",
  up: "ok",
  available: "ok",
  warning: "warn",
  stale: "warn",
  degraded: "warn",
  pending: "warn",
  draining: "warn",
  maintenance: "warn",
  connecting: "warn",
  acknowledged: "info",
  critical: "bad",
  error: "bad",
  unknown: "warn",
  offline: "bad",
  disconnected: "bad",
  down: "bad",
  inactive: "muted",
  resolved: "muted",
  disabled: "muted",
  info: "info",
};

/** A status word with a colour and, for colour-blind readers, the word itself. */
export function Badge(props: { value: unknown; label?: string }) {
  const v = String(props.value ?? "unknown").toLowerCase();
  return <span class={`badge ${TONES[v] ?? "muted"}`}>{props.label ?? String(props.value ?? "—")}</span>;
}

export function ErrorNote(props: { error?: ApiError | string }) {
  if (!props.error) return null;
  const msg = typeof props.error === "string" ? props.error : props.error.problem.message;
  return (
    <p class="error" role="alert">
      {msg}
    </p>
  );
}

export function Field(props: {
  label: string;
  name: string;
  error?: ApiError;
  hint?: string;
  children: ComponentChildren;
}) {
  const fieldError = props.error?.problem.fields[props.name];
  return (
    <div class={fieldError ? "field invalid" : "field"}>
      <label for={`f-${props.name}`}>{props.label}</label>
      {props.children}
      {props.hint && <small class="muted">{props.hint}</small>}
      {fieldError && (
        <small class="error" id={`e-${props.name}`} role="alert">
          {fieldError}
        </small>
      )}
    </div>
  );
}

/** A confirmation dialog on the native <dialog> element (focus trap and Escape for free). */
export function Confirm(props: {
  open: boolean;
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} onClose={props.onCancel} aria-labelledby="confirm-title">
      <h2 id="confirm-title">{props.title}</h2>
      {props.children}
      <div class="actions">
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" class={props.danger ? "danger" : "primary"} onClick={props.onConfirm}>
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

export function Card(props: { title: string; children: ComponentChildren; wide?: boolean; href?: string }) {
  return (
    <section class={props.wide ? "card wide" : "card"} aria-label={props.title}>
      <h2>{props.href ? <a href={props.href}>{props.title}</a> : props.title}</h2>
      {props.children}
    </section>
  );
}

export function Stat(props: { label: string; value: ComponentChildren; tone?: string }) {
  return (
    <div class={`stat ${props.tone ?? ""}`}>
      <span class="stat-value">{props.value}</span>
      <span class="stat-label">{props.label}</span>
    </div>
  );
}
