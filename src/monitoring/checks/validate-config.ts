import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { InvalidRequestError } from "../../kernel/errors.ts";
import { CHECK_CONFIG_SCHEMAS } from "./config-schemas.ts";
import { CHECK_TYPES, type CheckType } from "./types.ts";

/**
 * Compiled on the first check written, not when the module loads: compiling every check type's
 * schema was a visible share of each start's CPU (issue 14 goal 5, docs/decisions/0112).
 */
let validators: Map<CheckType, ValidateFunction> | undefined;
function validatorFor(checkType: string): ValidateFunction | undefined {
  if (!validators) {
    const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false, useDefaults: false });
    validators = new Map(CHECK_TYPES.map((t) => [t, ajv.compile(CHECK_CONFIG_SCHEMAS[t])]));
  }
  return validators.get(checkType as CheckType);
}

function describe(e: ErrorObject, checkType: CheckType): { member: string; text: string } {
  const base = `config${e.instancePath.replace(/\//g, ".")}`;
  if (e.keyword === "additionalProperties") {
    const extra = String((e.params as { additionalProperty: string }).additionalProperty);
    const parent = e.instancePath === "" ? CHECK_CONFIG_SCHEMAS[checkType] : null;
    const known = parent ? Object.keys((parent.properties as object) ?? {}).join(", ") : null;
    return {
      member: `${base}.${extra}`,
      text: `${base}.${extra} is not an option of ${checkType} checks${known ? ` (options: ${known})` : ""}`,
    };
  }
  return { member: base, text: `${base} ${e.message ?? "is invalid"}` };
}

/**
 * Refuse a config that the check type does not understand, naming every bad member (400
 * `invalid_config`), so a typo can never silently turn into a default.
 */
export function validateCheckConfig(checkType: string, config: unknown): void {
  const validate = validatorFor(checkType);
  if (!validate || config === undefined || config === null) return;
  if (validate(config)) return;
  // anyOf reports each branch; one line per member is what a person needs.
  const seen = new Map<string, string>();
  for (const e of validate.errors ?? []) {
    const d = describe(e, checkType as CheckType);
    if (!seen.has(d.member) || e.keyword === "additionalProperties") seen.set(d.member, d.text);
  }
  const first = [...seen.keys()][0] ?? "config";
  throw new InvalidRequestError([...seen.values()].join("; "), {
    code: "invalid_config",
    source: { pointer: `/data/attributes/${first.replace(/\./g, "/")}` },
    extra: { members: [...seen.keys()] },
  });
}
