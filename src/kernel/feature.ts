import type { FastifyInstance } from "fastify";
import type { AppContext } from "./context.ts";

/**
 * A domain's hook into the process: its HTTP routes and its background work.
 * `src/features.ts` lists them; the server wires them in that order.
 */
export interface Feature {
  name: string;
  /** Register routes (and hooks) on the root instance. */
  routes?(app: FastifyInstance, ctx: AppContext): Promise<void> | void;
  /** Start background work after the server listens (schedulers, cleanup, ingest receivers). */
  start?(ctx: AppContext): Promise<void> | void;
  /** Stop background work; called before the database closes. */
  stop?(): Promise<void> | void;
}
