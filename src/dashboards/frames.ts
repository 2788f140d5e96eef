import type { Actor } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { runQuery } from "../srql/run.ts";
import type { FrameEncoding } from "./manifest.ts";
import { runnablePackage } from "./packages.ts";

export interface FrameResult {
  encoding: FrameEncoding;
  results: Record<string, unknown>[];
  pagination: { next_cursor: string | null; prev_cursor: string | null; limit: number };
  arrow(): Promise<Uint8Array>;
}

function optionalString(body: Record<string, unknown>, key: string, max: number): string | null {
  const v = body[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== "string" || v.length > max) {
    throw new InvalidRequestError(`${key} must be a string of at most ${max} characters`, {
      source: { pointer: `/${key}` },
    });
  }
  return v;
}

/**
 * Run one of a package's data frames as the caller (SRQL's own authorization applies). The
 * manifest's query runs unless the package holds `srql.execute`, which lets the renderer
 * replace it (`srql.update`) and page it with cursors (`srql.page`).
 */
export async function runFrame(
  ctx: AppContext,
  actor: Actor,
  packageId: string,
  frameId: string,
  rawBody: unknown,
): Promise<FrameResult> {
  const pkg = await runnablePackage(ctx, packageId);
  const frame = pkg.manifest.data_frames.find((f) => f.id === frameId);
  if (!frame) throw new NotFoundError(`the package has no data frame ${frameId}`);
  const body =
    rawBody && typeof rawBody === "object" && !Array.isArray(rawBody)
      ? (rawBody as Record<string, unknown>)
      : {};
  const mayExecute = pkg.manifest.capabilities.includes("srql.execute");
  const query = optionalString(body, "query", 4000);
  const cursor = optionalString(body, "cursor", 4000);
  const direction = optionalString(body, "direction", 4);
  if ((query !== null || cursor !== null) && !mayExecute) {
    throw new InvalidRequestError("the package lacks the srql.execute capability", {
      code: "invalid_request",
    });
  }
  if (direction !== null && direction !== "next" && direction !== "prev") {
    throw new InvalidRequestError("direction must be next or prev", { source: { pointer: "/direction" } });
  }
  const limit = body.limit;
  if (
    limit !== undefined &&
    limit !== null &&
    (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > 1000)
  ) {
    throw new InvalidRequestError("limit must be an integer from 1 to 1000", {
      source: { pointer: "/limit" },
    });
  }
  const res = await runQuery(ctx, actor, {
    query: query ?? frame.query,
    cursor,
    direction: (direction as "next" | "prev" | null) ?? null,
    limit: (limit as number | undefined) ?? frame.limit ?? null,
  });
  return {
    encoding: frame.encoding,
    results: res.results,
    pagination: res.pagination,
    // apache-arrow loads on the first Arrow frame, not at start-up (docs/decisions/0112).
    arrow: async () => (await import("./arrow.ts")).rowsToArrowIpc(res.results),
  };
}
