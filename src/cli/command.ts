import type { ParsedArgs } from "./args.ts";

export interface Command {
  name: string;
  /** One line for `netmon --help`. */
  summary: string;
  /** Full usage text for `netmon <name> --help`. */
  usage: string;
  /** Flags that take no value. */
  booleanFlags?: string[];
  run(args: ParsedArgs): Promise<number>;
}
