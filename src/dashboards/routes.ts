import fs from "node:fs";
import multipart from "@fastify/multipart";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Actor } from "../access/actor.ts";
import { ACCESS_DENIED_HEADER, accessState } from "../access/feature.ts";
import { errorHandler } from "../http/errors.ts";
import type { AppContext } from "../kernel/context.ts";
import {
  AppError,
  AuthenticationRequiredError,
  InvalidRequestError,
  isAppError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  UnsupportedMediaTypeError,
} from "../kernel/errors.ts";
import { isUuid } from "../kernel/ids.ts";
import { type AuditAction, recordAudit } from "./audit.ts";
import { runFrame } from "./frames.ts";
import { checkManifest, MANIFEST_MAX_BYTES, type Manifest } from "./manifest.ts";
import {
  checkRoute,
  disablePackage,
  enablePackage,
  getPackage,
  installedBySlug,
  listInstalled,
  listPackages,
  type PackageRow,
  publishPackage,
  runnablePackage,
  serializePackage,
  setVerification,
} from "./packages.ts";
import {
  discardRenderer,
  RENDERER_MAX_BYTES,
  rendererFile,
  type StagedRenderer,
  stageRenderer,
} from "./renderer-store.ts";

/** Spec 8: 11 or more publishes in 60 s on one JWT answer 429. */
const PUBLISH_BUDGET = { requests: 10, windowSeconds: 60 };
const MANIFEST_TYPES = new Set(["application/json", "text/json"]);
const RENDERER_TYPES = new Set(["application/javascript", "text/javascript", "application/wasm"]);
const ARROW_STREAM = "application/vnd.apache.arrow.stream";

function actorOf(request: FastifyRequest): Actor {
  if (!request.actor) throw new AuthenticationRequiredError();
  return request.actor;
}

function mediaType(value: string | undefined): string {
  return (value ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/**
 * The dashboard routes answer the codes of spec 7's table: a missing, revoked or unknown bearer
 * JWT is `unauthorized` there (the generic edge says `authentication_required`).
 */
const AUDITED_ROUTES: Readonly<Record<string, AuditAction>> = Object.freeze({
  "/api/v1/dashboard-packages": "dashboard_publish",
  "/api/v1/dashboard-packages/:id/enable": "dashboard_enable",
  "/api/v1/dashboard-packages/:id/disable": "dashboard_disable",
});

/**
 * The dashboard routes answer the codes of spec 7's table: a missing, revoked or unknown bearer
 * JWT is `unauthorized` there (the generic edge says `authentication_required`). A caller the
 * access rule refused (no permission) is known by then, so that refusal is audited here: the
 * handler, which audits everything else, never ran.
 */
function dashboardErrors(ctx: AppContext) {
  return (error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    if (error instanceof AuthenticationRequiredError && error.code === "authentication_required") {
      return errorHandler(
        new AuthenticationRequiredError(error.message, { code: "unauthorized" }),
        request,
        reply,
      );
    }
    const url = request.routeOptions.url ?? "";
    const action = Object.hasOwn(AUDITED_ROUTES, url) ? AUDITED_ROUTES[url] : undefined;
    if (action && request.actor && reply.getHeader(ACCESS_DENIED_HEADER) === "rule") {
      const id = (request.params as { id?: string } | undefined)?.id;
      // recordAudit never throws; the response does not wait for it.
      void recordAudit(ctx, request.actor, {
        action,
        packageId: id && isUuid(id) ? id : null,
        result: "rejected",
        reason: errorCode(error),
      });
    }
    return errorHandler(error, request, reply);
  };
}

function packageBody(p: PackageRow, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: p.id,
    dashboard_id: p.dashboard_id,
    version: p.version,
    route_slug: p.route_slug,
    status: p.status,
    verification_status: p.verification_status,
    content_hash: p.content_hash,
    ...extra,
  };
}

interface Upload {
  manifest: Buffer | null;
  manifestType: string | null;
  manifestTooLarge: boolean;
  renderer: StagedRenderer | null;
  rendererType: string | null;
  route: string | null;
  routeSeen: boolean;
  signature: string | null;
}

async function readBounded(
  stream: AsyncIterable<unknown>,
  max: number,
): Promise<{ bytes: Buffer; over: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  for await (const c of stream) {
    const buf = c as Buffer;
    size += buf.length;
    if (size > max) over = true;
    if (!over) chunks.push(buf);
  }
  return { bytes: Buffer.concat(chunks), over };
}

/**
 * Read the multipart body part by part. The renderer streams to disk as it arrives (hashed and
 * capped there); the manifest is read up to its cap; text fields are small by busboy's limits.
 * Parts other than manifest, renderer, route and signature are drained and ignored.
 */
async function readUpload(ctx: AppContext, request: FastifyRequest): Promise<Upload> {
  const up: Upload = {
    manifest: null,
    manifestType: null,
    manifestTooLarge: false,
    renderer: null,
    rendererType: null,
    route: null,
    routeSeen: false,
    signature: null,
  };
  try {
    const parts = request.parts({
      limits: { fileSize: RENDERER_MAX_BYTES, files: 3, fields: 6, parts: 8, fieldSize: MANIFEST_MAX_BYTES },
    });
    for await (const part of parts) {
      if (part.type === "file") {
        if (part.fieldname === "renderer" && !up.renderer) {
          up.rendererType = mediaType(part.mimetype);
          if (!RENDERER_TYPES.has(up.rendererType)) {
            await readBounded(part.file, 0);
            continue;
          }
          up.renderer = await stageRenderer(ctx.config.dataDir, part.file, () => part.file.truncated);
        } else if (part.fieldname === "manifest" && !up.manifest) {
          up.manifestType = mediaType(part.mimetype);
          const r = await readBounded(part.file, MANIFEST_MAX_BYTES);
          up.manifest = r.bytes;
          up.manifestTooLarge = r.over || part.file.truncated;
        } else if (part.fieldname === "signature" && up.signature === null) {
          up.signature = (await readBounded(part.file, 1024)).bytes.toString("utf8").trim();
        } else {
          await readBounded(part.file, 0);
        }
        continue;
      }
      const value = part.value;
      if (part.fieldname === "route") {
        up.routeSeen = true;
        up.route = typeof value === "string" ? value.trim() : null;
      } else if (part.fieldname === "signature") {
        up.signature = typeof value === "string" ? value.trim() : null;
      } else if (part.fieldname === "manifest" && !up.manifest) {
        // A manifest sent as a plain field (no filename): the multipart layer already parsed
        // JSON-typed fields; keep the text so one validation path serves both.
        up.manifestType = mediaType(part.mimetype) || "text/plain";
        up.manifest = Buffer.from(typeof value === "string" ? value : JSON.stringify(value), "utf8");
        up.manifestTooLarge = part.valueTruncated;
      }
    }
  } catch (err) {
    await discardRenderer(up.renderer);
    const code = (err as { code?: string }).code;
    if (code === "FST_INVALID_MULTIPART_CONTENT_TYPE") {
      throw new UnsupportedMediaTypeError("the body must be multipart/form-data", { extra: { part: null } });
    }
    if (code === "FST_INVALID_JSON_FIELD_ERROR") {
      throw new InvalidRequestError("the manifest is not valid JSON", {
        code: "invalid_manifest",
        extra: { errors: ["invalid json: the manifest field does not parse"] },
      });
    }
    if (code === "FST_PARTS_LIMIT" || code === "FST_FILES_LIMIT" || code === "FST_FIELDS_LIMIT") {
      throw new PayloadTooLargeError("too many parts", { extra: { part: null } });
    }
    if (isAppError(err)) throw err;
    throw new InvalidRequestError(`the multipart body could not be read: ${(err as Error).message}`);
  }
  return up;
}

/** Spec 7's checks in the original's order: manifest part, renderer part, route, then the manifest itself. */
function checkUpload(up: Upload): { manifest: Manifest; renderer: StagedRenderer; route: string | null } {
  if (up.manifest === null) {
    throw new InvalidRequestError("the manifest part is missing", {
      code: "missing_part",
      extra: { part: "manifest" },
    });
  }
  if (!MANIFEST_TYPES.has(up.manifestType ?? "")) {
    throw new UnsupportedMediaTypeError(
      `the manifest part must be application/json (got ${up.manifestType || "none"})`,
      {
        extra: { part: "manifest" },
      },
    );
  }
  if (up.manifestTooLarge) {
    throw new PayloadTooLargeError(`the manifest part exceeds ${MANIFEST_MAX_BYTES} bytes`, {
      extra: { part: "manifest" },
    });
  }
  if (up.rendererType === null) {
    throw new InvalidRequestError("the renderer part is missing", {
      code: "missing_part",
      extra: { part: "renderer" },
    });
  }
  if (!up.renderer) {
    throw new UnsupportedMediaTypeError(
      `the renderer part must be application/javascript, text/javascript or application/wasm (got ${up.rendererType || "none"})`,
      { extra: { part: "renderer" } },
    );
  }
  if (up.renderer.tooLarge) {
    throw new PayloadTooLargeError(`the renderer part exceeds ${RENDERER_MAX_BYTES} bytes`, {
      extra: { part: "renderer" },
    });
  }
  const route = checkRoute(up.routeSeen ? up.route : null);
  const checked = checkManifest(up.manifest);
  if (!checked.ok) {
    throw new InvalidRequestError(`the manifest is invalid: ${checked.errors.join("; ")}`, {
      code: "invalid_manifest",
      extra: { errors: checked.errors },
    });
  }
  return { manifest: checked.manifest, renderer: up.renderer, route };
}

function errorCode(err: unknown): string {
  return isAppError(err) ? err.code : "internal_error";
}

/** Run a lifecycle action and write its audit record whatever the outcome. */
async function audited(
  ctx: AppContext,
  actor: Actor,
  action: AuditAction,
  known: { packageId?: string | null },
  fn: () => Promise<{ row: PackageRow; result: string }>,
): Promise<PackageRow> {
  try {
    const { row, result } = await fn();
    await recordAudit(ctx, actor, {
      action,
      packageId: row.id,
      dashboardId: row.dashboard_id,
      version: row.version,
      routeSlug: row.route_slug,
      contentHash: row.content_hash,
      result,
    });
    return row;
  } catch (err) {
    const row = known.packageId ? await getPackage(ctx, known.packageId).catch(() => null) : null;
    await recordAudit(ctx, actor, {
      action,
      packageId: row?.id ?? null,
      dashboardId: row?.dashboard_id ?? null,
      version: row?.version ?? null,
      routeSlug: row?.route_slug ?? null,
      contentHash: row?.content_hash ?? null,
      result: "rejected",
      reason: errorCode(err),
    });
    throw err;
  }
}

export async function dashboardRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  await app.register(async (scoped) => {
    // Over-size parts are reported by us (`payload_too_large` naming the part), not thrown by the plugin.
    await scoped.register(multipart, { limits: { fileSize: RENDERER_MAX_BYTES }, throwFileSizeLimit: false });
    scoped.setErrorHandler(dashboardErrors(ctx));
    const policy = (permission: string) => ({ access: { permission }, rateLimit: "api_default" as const });

    scoped.post(
      "/api/v1/dashboard-packages",
      { config: { ...policy("cli.dashboard.publish"), body: [] } },
      async (request, reply) => {
        const actor = actorOf(request);
        let staged: StagedRenderer | null = null;
        let manifest: Manifest | null = null;
        let route: string | null = null;
        try {
          // Bearer JWTs must carry the scope; a signed-in browser session stands on the permission.
          if (actor.authMethod !== "session" && !(actor.scopes ?? []).includes("dashboard.publish")) {
            throw new AppError(
              403,
              "insufficient_scope",
              "the token lacks the dashboard.publish scope",
              "Forbidden",
              {
                extra: { required: "dashboard.publish" },
              },
            );
          }
          const subject = actor.tokenJti ? `jti:${actor.tokenJti}` : `ip:${request.ip}`;
          const decision = await accessState(ctx)
            .limiter.consume("dashboard_publish", subject, PUBLISH_BUDGET)
            .catch(() => null);
          if (decision && !decision.allowed) throw new RateLimitedError(decision.retryAfter);
          const up = await readUpload(ctx, request);
          staged = up.renderer;
          const checked = checkUpload(up);
          manifest = checked.manifest;
          route = checked.route;
          const res = await publishPackage(ctx, actor, {
            manifest: checked.manifest,
            renderer: checked.renderer,
            mediaType: up.rendererType as string,
            route: checked.route,
            signature: up.signature || null,
          });
          staged = null;
          await recordAudit(ctx, actor, {
            action: "dashboard_publish",
            packageId: res.package.id,
            dashboardId: res.package.dashboard_id,
            version: res.package.version,
            routeSlug: res.package.route_slug,
            contentHash: res.package.content_hash,
            result: res.result,
          });
          reply.header("cache-control", "no-store");
          return packageBody(res.package, { status: res.package.status, result: res.result });
        } catch (err) {
          await recordAudit(ctx, actor, {
            action: "dashboard_publish",
            dashboardId: manifest?.id ?? null,
            version: manifest?.version ?? null,
            routeSlug: route,
            contentHash: staged?.sha256 ?? null,
            result: "rejected",
            reason: errorCode(err),
          });
          reply.header("cache-control", "no-store");
          throw err;
        } finally {
          await discardRenderer(staged);
        }
      },
    );

    scoped.post(
      "/api/v1/dashboard-packages/:id/enable",
      { config: { ...policy("cli.dashboard.enable"), body: ["route"] } },
      async (request, reply) => {
        const { id } = request.params as { id: string };
        const body = (request.body ?? {}) as { route?: unknown };
        const row = await audited(ctx, actorOf(request), "dashboard_enable", { packageId: id }, async () => ({
          row: await enablePackage(ctx, id, checkRoute(body.route)),
          result: "enabled",
        }));
        reply.header("cache-control", "no-store");
        return packageBody(row, { expected_status: "enabled" });
      },
    );

    scoped.post(
      "/api/v1/dashboard-packages/:id/disable",
      { config: { ...policy("cli.dashboard.disable"), body: [] } },
      async (request, reply) => {
        const { id } = request.params as { id: string };
        const row = await audited(
          ctx,
          actorOf(request),
          "dashboard_disable",
          { packageId: id },
          async () => ({
            row: await disablePackage(ctx, id),
            result: "disabled",
          }),
        );
        reply.header("cache-control", "no-store");
        return packageBody(row, { expected_status: "disabled" });
      },
    );

    const admin = { access: { role: "admin" as const }, rateLimit: "api_default" as const };
    scoped.post(
      "/api/v1/dashboard-packages/:id/verify",
      { config: { ...admin, body: [] } },
      async (request) => {
        const { id } = request.params as { id: string };
        const row = await audited(ctx, actorOf(request), "dashboard_verify", { packageId: id }, async () => ({
          row: await setVerification(ctx, id, "verified", null),
          result: "verified",
        }));
        return { data: serializePackage(row) };
      },
    );

    scoped.post(
      "/api/v1/dashboard-packages/:id/reject",
      { config: { ...admin, body: ["reason"] } },
      async (request) => {
        const { id } = request.params as { id: string };
        const body = (request.body ?? {}) as { reason?: unknown };
        const reason =
          typeof body.reason === "string" && body.reason.trim()
            ? body.reason.trim().slice(0, 500)
            : "rejected by an administrator";
        const row = await audited(ctx, actorOf(request), "dashboard_reject", { packageId: id }, async () => ({
          row: await setVerification(ctx, id, "failed", reason),
          result: "failed",
        }));
        return { data: serializePackage(row) };
      },
    );

    scoped.get("/api/v1/dashboard-packages", { config: policy("dashboards.packages.view_all") }, async () => {
      return { data: (await listPackages(ctx)).map(serializePackage) };
    });

    scoped.get(
      "/api/v1/dashboard-packages/:id",
      { config: policy("dashboards.packages.view_all") },
      async (request) => {
        const { id } = request.params as { id: string };
        return { data: serializePackage(await getPackage(ctx, id)) };
      },
    );

    // What the console may run: enabled and verified packages, to any signed-in user.
    const signedIn = { access: { authenticated: true as const }, rateLimit: "api_default" as const };
    scoped.get("/api/v1/dashboards", { config: signedIn }, async () => {
      return { data: (await listInstalled(ctx)).map(installedBody) };
    });

    scoped.get("/api/v1/dashboards/:slug", { config: signedIn }, async (request) => {
      const { slug } = request.params as { slug: string };
      return { data: installedBody(await installedBySlug(ctx, slug)) };
    });

    scoped.get("/api/v1/dashboard-packages/:id/renderer", { config: signedIn }, async (request, reply) => {
      const { id } = request.params as { id: string };
      const row = await runnablePackage(ctx, id).catch((err) => {
        if (isAppError(err) && err.status === 404) throw new NotFoundError("dashboard renderer not found");
        throw err;
      });
      const file = await rendererFile(ctx.db, ctx.config.dataDir, row.renderer_path);
      if (!file) throw new NotFoundError("dashboard renderer not found");
      return reply
        .type(row.renderer_media_type === "application/wasm" ? "application/wasm" : "text/javascript")
        .header("etag", `"${row.content_hash}"`)
        .header("cache-control", "private, no-cache")
        .send(fs.createReadStream(file));
    });

    scoped.post(
      "/api/v1/dashboard-packages/:id/frames/:frameId",
      { config: { ...policy("analytics.view"), body: ["query", "cursor", "direction", "limit"] } },
      async (request, reply) => {
        const { id, frameId } = request.params as { id: string; frameId: string };
        const frame = await runFrame(ctx, actorOf(request), id, frameId, request.body);
        reply
          .header("cache-control", "no-store")
          .header("x-srql-next-cursor", frame.pagination.next_cursor ?? "")
          .header("x-srql-prev-cursor", frame.pagination.prev_cursor ?? "")
          .header("x-srql-limit", String(frame.pagination.limit))
          .header("x-srql-row-count", String(frame.results.length));
        if (frame.encoding === "arrow_ipc") {
          return reply.type(ARROW_STREAM).send(Buffer.from(await frame.arrow()));
        }
        return {
          id: frameId,
          encoding: "json_rows",
          results: frame.results,
          pagination: frame.pagination,
        };
      },
    );
  });
}

function installedBody(p: PackageRow): Record<string, unknown> {
  return {
    id: p.id,
    dashboard_id: p.dashboard_id,
    name: p.name,
    version: p.version,
    description: p.manifest.description ?? null,
    route_slug: p.route_slug,
    content_hash: p.content_hash,
    renderer_url: `/api/v1/dashboard-packages/${p.id}/renderer`,
    entrypoint: p.manifest.renderer.entrypoint,
    capabilities: p.manifest.capabilities,
    data_frames: p.manifest.data_frames,
    settings: {},
  };
}
