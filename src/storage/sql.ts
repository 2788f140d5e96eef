/**
 * Parameterised SQL built with a tagged template. Interpolated values always become
 * `$n` parameters; only `ident()`/`raw()` fragments (from code, never user input) are spliced.
 */

export interface SqlQuery {
  readonly text: string;
  readonly values: readonly unknown[];
}

const FRAGMENT = Symbol("sql.fragment");

export interface SqlFragment {
  readonly [FRAGMENT]: true;
  /** Text with placeholders written as `\u0000` to be numbered when the query is built. */
  readonly parts: readonly string[];
  readonly values: readonly unknown[];
}

export function isFragment(v: unknown): v is SqlFragment {
  return typeof v === "object" && v !== null && (v as { [FRAGMENT]?: true })[FRAGMENT] === true;
}

function fragment(parts: readonly string[], values: readonly unknown[]): SqlFragment {
  return { [FRAGMENT]: true, parts, values };
}

/** Build a fragment from a template: values become parameters, nested fragments are inlined. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): SqlFragment {
  const parts: string[] = [strings[0] ?? ""];
  const out: unknown[] = [];
  values.forEach((value, i) => {
    const next = strings[i + 1] ?? "";
    if (isFragment(value)) {
      // Merge: last part + first nested part, nested middle parts, last nested part + next.
      parts[parts.length - 1] += value.parts[0] ?? "";
      for (let j = 1; j < value.parts.length; j++) parts.push(value.parts[j] ?? "");
      out.push(...value.values);
      parts[parts.length - 1] += next;
    } else {
      out.push(value);
      parts.push(next);
    }
  });
  return fragment(parts, out);
}

const IDENT = /^[a-z_][a-z0-9_]*$/;

/** A quoted identifier. Only for names that come from code (declarations), never from requests. */
export function ident(...names: string[]): SqlFragment {
  for (const n of names) {
    if (!IDENT.test(n)) throw new Error(`refusing unsafe SQL identifier '${n}'`);
  }
  return fragment([names.map((n) => `"${n}"`).join(".")], []);
}

/** Literal SQL text from code. Never pass request data. */
export function raw(text: string): SqlFragment {
  return fragment([text], []);
}

/** Join fragments with a separator. */
export function join(items: readonly SqlFragment[], separator = ", "): SqlFragment {
  if (items.length === 0) return raw("");
  let acc = items[0] as SqlFragment;
  for (let i = 1; i < items.length; i++) acc = sql`${acc}${raw(separator)}${items[i]}`;
  return acc;
}

/** Number the placeholders, producing text and values ready for the driver. */
export function build(f: SqlFragment): SqlQuery {
  let text = f.parts[0] ?? "";
  for (let i = 1; i < f.parts.length; i++) text += `$${i}${f.parts[i]}`;
  return { text, values: f.values };
}

export function toQuery(q: SqlFragment | SqlQuery | string, values?: readonly unknown[]): SqlQuery {
  if (typeof q === "string") return { text: q, values: values ?? [] };
  if (isFragment(q)) return build(q);
  return q;
}
