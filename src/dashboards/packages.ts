import type { Actor } from "../access/actor.ts";
import { stateTable, transitionRow, transitionRows } from "../jsonapi/engine/transitions.ts";
import { defineStateMachine } from "../jsonapi/state-machine.ts";
import type { AppContext } from "../kernel/context.ts";
import { AppError, ConflictError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { isUuid } from "../kernel/ids.ts";
import { isUniqueViolation } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import { verifyWithTrustedKeys } from "./keys.ts";
import type { Manifest } from "./manifest.ts";
import { persistRenderer, type StagedRenderer } from "./renderer-store.ts";

/** Spec 4.6: a route slug. */
export const ROUTE_SLUG = /^[a-z0-9][a-z0-9-]{1,62}$/;
const SLUG_INDEX = "dashboard_packages_enabled_slug";

export const PACKAGE_STATES = ["staged", "enabled", "disabled"] as const;
export type PackageStatus = (typeof PACKAGE_STATES)[number];
export const VERIFICATION_STATES = ["pending", "verified", "failed"] as const;
export type VerificationStatus = (typeof VERIFICATION_STATES)[number];

/**
 * Where a package runs (issue 11: state columns are written only by the state writer). Enabling
 * an enabled package (e.g. to move it to another slug) and disabling a disabled or staged one
 * are accepted, as they always were.
 */
export const packageMachine = defineStateMachine({
  name: "dashboard-package",
  attribute: "status",
  states: PACKAGE_STATES,
  initial: ["staged"],
  transitions: {
    enable: { from: "*", to: "enabled" },
    disable: { from: "*", to: "disabled" },
    /** Another version of the same dashboard was enabled (one version runs at a time). */
    supersede: { from: ["enabled"], to: "disabled" },
    /** Its renderer was refused by an administrator. */
    reject: { from: ["enabled"], to: "disabled" },
  },
});

/**
 * Whether a package's renderer is trusted. An administrator's verdict may be given again or
 * reversed; publishing other bytes over a replaceable package starts its verification over.
 */
export const verificationMachine = defineStateMachine({
  name: "dashboard-package-verification",
  attribute: "verification_status",
  states: VERIFICATION_STATES,
  initial: ["pending", "verified", "failed"],
  transitions: {
    verify: { from: "*", to: "verified" },
    reject: { from: "*", to: "failed" },
    republish_unsigned: { from: "*", to: "pending" },
    republish_verified: { from: "*", to: "verified" },
    republish_failed: { from: "*", to: "failed" },
  },
});

/** dashboard_packages holds two machines, one per state column. */
export const packagesTable = stateTable({
  machine: packageMachine,
  table: "dashboard_packages",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: { route_slug: "text" },
});

export const packageVerificationTable = stateTable({
  machine: verificationMachine,
  table: "dashboard_packages",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: {
    verification_error: "text",
    name: "text",
    manifest: "jsonb",
    content_hash: "text",
    renderer_path: "text",
    renderer_media_type: "text",
    renderer_size: "bigint",
    route_slug: "text",
    signature: "text",
    signed_by_key_id: "uuid",
    published_by: "uuid",
  },
});

const REPUBLISH: Record<VerificationStatus, string> = {
  pending: "republish_unsigned",
  verified: "republish_verified",
  failed: "republish_failed",
};

export interface PackageRow {
  [k: string]: unknown;
  id: string;
  dashboard_id: string;
  version: string;
  name: string;
  manifest: Manifest;
  content_hash: string;
  renderer_path: string;
  renderer_media_type: string;
  renderer_size: number;
  route_slug: string | null;
  status: PackageStatus;
  verification_status: VerificationStatus;
  verification_error: string | null;
  signature: string | null;
  signed_by_key_id: string | null;
  published_by: string | null;
  created_at: Date;
  updated_at: Date;
}

export function serializePackage(p: PackageRow): Record<string, unknown> {
  return {
    id: p.id,
    dashboard_id: p.dashboard_id,
    name: p.name,
    version: p.version,
    route_slug: p.route_slug,
    status: p.status,
    verification_status: p.verification_status,
    verification_error: p.verification_error,
    content_hash: p.content_hash,
    renderer_media_type: p.renderer_media_type,
    renderer_size: p.renderer_size,
    signed: p.signature !== null,
    manifest: p.manifest,
    created_at: p.created_at.toISOString(),
    updated_at: p.updated_at.toISOString(),
  };
}

export function checkRoute(route: unknown): string | null {
  if (route === undefined || route === null || route === "") return null;
  if (typeof route !== "string" || !ROUTE_SLUG.test(route)) {
    throw new InvalidRequestError(`route_slug must match ${ROUTE_SLUG.source}`, {
      code: "invalid_route",
      extra: { reason: `route_slug must match ${ROUTE_SLUG.source}` },
    });
  }
  return route;
}

function slugInUse(slug: string, owner: string | null): AppError {
  return new ConflictError(`route '${slug}' is bound to an enabled package of another dashboard`, {
    code: "slug_in_use",
    extra: { route: slug, owner_dashboard_id: owner },
  });
}

async function enabledOwner(ctx: AppContext, slug: string): Promise<string | null> {
  const row = await ctx.db.one<{ dashboard_id: string }>(
    sql`SELECT dashboard_id FROM dashboard_packages WHERE route_slug = ${slug} AND status = 'enabled'`,
  );
  return row?.dashboard_id ?? null;
}

export interface PublishInput {
  manifest: Manifest;
  renderer: StagedRenderer;
  mediaType: string;
  route: string | null;
  signature: string | null;
}

export interface PublishResult {
  package: PackageRow;
  result: "written" | "idempotent_noop";
}

/**
 * Store a package (spec 4.6). The same id@version with the same bytes is a no-op; other bytes
 * replace a package that is neither enabled nor verified (its verification starts over) and are
 * refused otherwise. A route slug held by another dashboard's enabled package is refused here;
 * the database's partial unique index settles the race at enable time.
 */
export async function publishPackage(
  ctx: AppContext,
  actor: Actor,
  input: PublishInput,
): Promise<PublishResult> {
  const { manifest, renderer } = input;
  if (manifest.renderer.sha256 !== renderer.sha256) {
    throw new AppError(
      422,
      "unprocessable_renderer",
      "manifest.renderer.sha256 differs from the SHA-256 of the uploaded renderer",
      "Unprocessable renderer",
      { extra: { reason: "sha256_mismatch", expected: manifest.renderer.sha256, actual: renderer.sha256 } },
    );
  }
  if (input.route) {
    const owner = await enabledOwner(ctx, input.route);
    if (owner !== null && owner !== manifest.id) throw slugInUse(input.route, owner);
  }
  const verification = input.signature
    ? await verifyWithTrustedKeys(ctx, manifest, renderer.sha256, input.signature)
    : null;
  const verificationStatus: VerificationStatus = verification
    ? verification.keyId
      ? "verified"
      : "failed"
    : "pending";
  const verificationError = verification && !verification.keyId ? verification.reason : null;
  const stored = await persistRenderer(ctx.db, ctx.config.dataDir, renderer);
  const publishedBy = actor.kind === "user" ? actor.id : null;
  const now = ctx.now();

  return ctx.db.transaction(async (tx) => {
    const inserted = await tx.one<PackageRow>(sql`
      INSERT INTO dashboard_packages (dashboard_id, version, name, manifest, content_hash, renderer_path,
        renderer_media_type, renderer_size, route_slug, verification_status, verification_error,
        signature, signed_by_key_id, published_by, created_at, updated_at)
      VALUES (${manifest.id}, ${manifest.version}, ${manifest.name}, ${JSON.stringify(manifest)}::jsonb,
        ${renderer.sha256}, ${stored}, ${input.mediaType}, ${renderer.size}, ${input.route},
        ${verificationStatus}, ${verificationError}, ${input.signature}, ${verification?.keyId ?? null},
        ${publishedBy}, ${now}, ${now})
      ON CONFLICT (dashboard_id, version) DO NOTHING
      RETURNING *`);
    if (inserted) return { package: inserted, result: "written" as const };

    const existing = await tx.one<PackageRow>(sql`
      SELECT * FROM dashboard_packages
      WHERE dashboard_id = ${manifest.id} AND version = ${manifest.version} FOR UPDATE`);
    if (!existing) throw new Error("dashboard package vanished during publish");
    if (existing.content_hash === renderer.sha256)
      return { package: existing, result: "idempotent_noop" as const };
    // A disabled package may be replaced (it runs nowhere); an enabled one, or a verified one
    // waiting to be enabled, keeps its bytes: a new version is the way to change them.
    const locked =
      existing.status === "enabled" ||
      (existing.status !== "disabled" && existing.verification_status === "verified");
    if (locked) {
      throw new ConflictError(
        `${manifest.id}@${manifest.version} is already published with other bytes; publish a new version`,
        {
          code: "version_already_published",
          extra: { id: existing.id, dashboard_id: existing.dashboard_id, version: existing.version },
        },
      );
    }
    const updated = await transitionRow<PackageRow>(
      tx,
      packageVerificationTable,
      existing.id,
      REPUBLISH[verificationStatus],
      {
        name: manifest.name,
        manifest,
        content_hash: renderer.sha256,
        renderer_path: stored,
        renderer_media_type: input.mediaType,
        renderer_size: renderer.size,
        route_slug: input.route ?? existing.route_slug,
        verification_error: verificationError,
        signature: input.signature,
        signed_by_key_id: verification?.keyId ?? null,
        published_by: publishedBy,
      },
      now,
    );
    return { package: updated, result: "written" as const };
  });
}

export async function getPackage(ctx: AppContext, id: string): Promise<PackageRow> {
  const row = isUuid(id)
    ? await ctx.db.one<PackageRow>(sql`SELECT * FROM dashboard_packages WHERE id = ${id}`)
    : undefined;
  if (!row) throw new NotFoundError(`no dashboard package ${id}`, { extra: { id } });
  return row;
}

export async function listPackages(ctx: AppContext): Promise<PackageRow[]> {
  return ctx.db.many<PackageRow>(
    sql`SELECT * FROM dashboard_packages ORDER BY dashboard_id, created_at DESC LIMIT 1000`,
  );
}

/** Packages a signed-in user can open: enabled and verified. */
export async function listInstalled(ctx: AppContext): Promise<PackageRow[]> {
  return ctx.db.many<PackageRow>(sql`
    SELECT * FROM dashboard_packages WHERE status = 'enabled' AND verification_status = 'verified'
    ORDER BY route_slug`);
}

export async function installedBySlug(ctx: AppContext, slug: string): Promise<PackageRow> {
  const row = ROUTE_SLUG.test(slug)
    ? await ctx.db.one<PackageRow>(sql`
        SELECT * FROM dashboard_packages
        WHERE route_slug = ${slug} AND status = 'enabled' AND verification_status = 'verified'`)
    : undefined;
  if (!row) throw new NotFoundError(`no dashboard is installed at ${slug}`);
  return row;
}

/** The package when it may run in a browser (enabled and verified), else 404. */
export async function runnablePackage(ctx: AppContext, id: string): Promise<PackageRow> {
  const row = await getPackage(ctx, id);
  if (row.status !== "enabled" || row.verification_status !== "verified") {
    throw new NotFoundError("dashboard renderer not found");
  }
  return row;
}

/**
 * Enable a verified package at its slug (or `route`). Other enabled versions of the same
 * dashboard are disabled in the same transaction (one version runs at a time); a slug held by
 * another dashboard fails on the partial unique index, which serialises concurrent enables.
 */
export async function enablePackage(ctx: AppContext, id: string, route: string | null): Promise<PackageRow> {
  const current = await getPackage(ctx, id);
  if (current.verification_status !== "verified") {
    throw new ConflictError("the package must be verified before it can be enabled", {
      code: "verification_required",
      extra: { id, verification_status: current.verification_status },
    });
  }
  const slug = route ?? current.route_slug;
  if (!slug) {
    throw new InvalidRequestError("the package has no route; pass {route: <slug>}", {
      code: "invalid_route",
      extra: { reason: "a route slug is required to enable a package" },
    });
  }
  const now = ctx.now();
  try {
    return await ctx.db.transaction(async (tx) => {
      await transitionRows(
        tx,
        packagesTable,
        "supersede",
        { where: sql`dashboard_id = ${current.dashboard_id} AND id <> ${id}` },
        {},
        now,
      );
      return await transitionRow<PackageRow>(
        tx,
        packagesTable,
        id,
        "enable",
        (row) => {
          // Checked again on the locked row: a concurrent reject wins over this enable.
          if (row.verification_status !== "verified")
            throw new ConflictError("the package must be verified before it can be enabled", {
              code: "verification_required",
              extra: { id },
            });
          return { route_slug: slug };
        },
        now,
      );
    });
  } catch (err) {
    if (isUniqueViolation(err, SLUG_INDEX) || isUniqueViolation(err)) {
      throw slugInUse(slug, await enabledOwner(ctx, slug).catch(() => null));
    }
    throw err;
  }
}

export async function disablePackage(ctx: AppContext, id: string): Promise<PackageRow> {
  await getPackage(ctx, id);
  return ctx.db.transaction((tx) =>
    transitionRow<PackageRow>(tx, packagesTable, id, "disable", {}, ctx.now()),
  );
}

/** An administrator vouches for (or refuses) a package's renderer; refusing also disables it. */
export async function setVerification(
  ctx: AppContext,
  id: string,
  verdict: "verified" | "failed",
  reason: string | null,
): Promise<PackageRow> {
  await getPackage(ctx, id);
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const row = await transitionRow<PackageRow>(
      tx,
      packageVerificationTable,
      id,
      verdict === "verified" ? "verify" : "reject",
      { verification_error: reason },
      now,
    );
    if (verdict !== "failed") return row;
    // The row is locked: a refused renderer stops running in the same transaction.
    const [disabled] = await transitionRows<PackageRow>(tx, packagesTable, "reject", { ids: [id] }, {}, now);
    return disabled ?? row;
  });
}
