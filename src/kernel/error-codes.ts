/**
 * Every error code netmon answers, declared once (issue 11). `AppError.code` is typed by this
 * catalogue, so a new free-string code does not compile; docs/errors.md is generated from it
 * (`node --import tsx scripts/error-docs.ts`) and a test holds the two equal, and holds every
 * code to at least one use in src/ (no documented code that nothing can answer).
 *
 * `status` is the HTTP status the code is answered with. Plain `/api` routes answer
 * `{"error": code, "message": ...}`; `/api/v2` answers a JSON:API errors document whose
 * `code` member is the same string.
 */
export interface ErrorCodeSpec {
  status: number;
  meaning: string;
}

function c(status: number, meaning: string): ErrorCodeSpec {
  return { status, meaning };
}

export const ERROR_CODES = {
  // --- generic, one per error class (used when no more specific code applies) ---
  invalid_request: c(400, "The request is malformed or a value is invalid; the message says which."),
  validation_error: c(422, "The document is well-formed but a value fails validation."),
  authentication_required: c(401, "No valid credentials were presented (session, bearer token or API key)."),
  forbidden: c(403, "The credentials are valid but lack the permission this route or action requires."),
  not_found: c(404, "No such route, or no such record visible to the caller."),
  conflict: c(409, "The change conflicts with the current state of the record."),
  gone: c(410, "The resource existed but is no longer available."),
  payload_too_large: c(413, "The request body exceeds the size limit (NETMON_BODY_LIMIT)."),
  unsupported_media_type: c(415, "The Content-Type is not one this route accepts."),
  not_acceptable: c(406, "The Accept header allows no media type this route can answer with."),
  rate_limited: c(
    429,
    "The request budget of this credential or address is spent; retry after `retry_after` seconds.",
  ),
  service_unavailable: c(503, "A dependency is temporarily unavailable; retry later."),
  invalid_transition: c(
    400,
    "The state machine does not allow this operation from the record's current state.",
  ),
  internal_error: c(500, "An unexpected failure; the message carries the request id to find it in the logs."),

  // --- HTTP edge: malformed requests ---
  bad_request: c(400, "The request could not be parsed as HTTP or was refused by the HTTP layer."),
  malformed_json: c(400, "The body is not valid JSON (or is empty where JSON is required)."),
  invalid_url: c(400, "The URL is not validly percent-encoded UTF-8."),
  uri_too_long: c(414, "A path parameter exceeds the length limit."),
  header_fields_too_large: c(431, "The request line or headers exceed the size limit."),
  request_timeout: c(408, "The request was not received in time."),
  invalid_value: c(400, "A value is out of range or not valid for its database column."),
  invalid_character: c(400, "A string contains a character netmon never stores (NUL, unpaired surrogate)."),
  too_deep: c(400, "The JSON document nests deeper than the limit."),
  unsafe_integer: c(400, "A JSON number is an integer beyond 2^53 that would lose precision."),
  unknown_member: c(
    400,
    "The body has a top-level member this route does not accept (a typo is never ignored).",
  ),
  csrf_invalid: c(403, "A cookie-authenticated write lacks the matching x-csrf-token header."),
  database_unavailable: c(503, "The database cannot be reached; retry after the Retry-After header."),
  storage_full: c(507, "The database's disk is full; nothing was written."),
  invalid_credentials: c(401, "The e-mail and password do not match an active account."),
  insufficient_scope: c(403, "The token lacks the scope this endpoint requires."),

  // --- access ---
  email_taken: c(409, "Another user has this e-mail address."),
  last_admin: c(409, "The change would leave no active administrator."),
  cannot_deactivate_self: c(400, "An administrator cannot deactivate their own account."),
  name_taken: c(409, "Another record of this kind has this name."),
  slug_taken: c(409, "Another composite check has this slug."),
  profile_in_use: c(409, "The role profile is assigned to users; reassign them first."),
  system_profile: c(403, "Built-in role profiles cannot be changed or deleted."),
  account_disabled: c(403, "The account is disabled; an administrator can enable it again."),
  local_login_disabled: c(
    403,
    "Local password sign-in is off for this account in the instance's single sign-on mode.",
  ),
  invalid_reset_link: c(400, "The password-reset link is unknown, used or expired."),
  mail_not_configured: c(404, "Password reset is off: no mail server is configured (NETMON_SMTP_URL)."),

  // --- inventory: device list and identity ---
  invalid_limit: c(400, "The `limit` parameter is not a whole number in range."),
  invalid_offset: c(400, "The `offset` parameter is not a whole number in range."),
  invalid_page: c(400, "The `page` parameter is not a whole number in range."),
  invalid_search: c(400, "The `search` parameter is invalid (repeated or too long)."),
  invalid_sort: c(400, "The sort field or direction is not one the list offers."),
  invalid_status: c(400, "The `status` filter is not a known value."),
  invalid_source: c(400, "The `source` filter is invalid."),
  invalid_device_type: c(400, "The `device_type` filter is invalid."),
  invalid_gateway_id: c(400, "The `gateway_id` filter is invalid."),
  invalid_group_id: c(400, "The `group_id` filter is not a valid group id."),
  invalid_uid: c(400, "The device uid is not well-formed."),
  invalid_type_id: c(400, "The OCSF `type_id` filter is not a known device type id."),
  invalid_first_seen_after: c(400, "`first_seen_after` is not an ISO 8601 date-time."),
  invalid_last_seen_after: c(400, "`last_seen_after` is not an ISO 8601 date-time."),
  invalid_ip: c(400, "The IP address is not valid."),
  missing_ip: c(400, "The lookup needs an IP address."),
  invalid_devices: c(400, "The `devices` list of the identity lookup is malformed."),
  empty_devices: c(400, "The identity lookup's `devices` list is empty."),
  too_many_devices: c(400, "The identity lookup names more devices than the limit."),
  ambiguous: c(409, "More than one device matches; the answer lists their uids."),
  mac_ip_conflict: c(409, "The MAC address and the IP address resolve to different devices."),
  invalid_updates: c(400, "The device-updates body is malformed; the message names the first bad record."),
  empty_updates: c(400, "The device-updates body holds no update."),
  too_many_updates: c(400, "The device-updates body holds more updates than the batch limit."),
  invalid_import: c(400, "The device import file is malformed; the message names the line."),
  invalid_parent: c(422, "The parent group does not exist or would create a cycle."),

  // --- inventory: source inventory and plugins ---
  source_required: c(400, "The source inventory request names no source."),
  instance_required: c(400, "The source inventory request names no instance."),
  invalid_identifier: c(400, "A source, instance or collection identifier is not well-formed."),
  invalid_presence: c(400, "The `presence` filter is not a known value."),
  invalid_cursor: c(400, "The pagination cursor is malformed, tampered with or from another query."),
  cursor_query_mismatch: c(400, "The cursor was issued for a different query."),
  unknown_query_parameter: c(400, "The request has a query parameter this route does not accept."),
  invalid_body: c(400, "The body is not the object this route expects."),
  invalid_record: c(400, "A record of the snapshot is malformed."),
  invalid_records: c(400, "The snapshot's `records` is not a list."),
  too_many_records: c(400, "The snapshot holds more records than the limit."),
  duplicate_record: c(400, "The snapshot holds the same record twice."),
  invalid_instance: c(400, "The `instance` parameter is invalid."),
  invalid_partition: c(400, "The `partition` parameter is invalid."),
  invalid_collection: c(400, "The `collection` parameter is invalid."),
  invalid_observed_at: c(400, "`observed_at` is not an ISO 8601 date-time."),
  source_snapshot_not_found: c(404, "No snapshot of this source, instance and collection exists."),
  source_collection_changed: c(409, "The collection changed since the cursor was issued; start again."),
  plugin_not_registered: c(403, "The plugin is not registered."),
  plugin_not_approved: c(403, "The plugin is registered but not approved by an administrator."),
  plugin_disabled: c(403, "The plugin is disabled."),
  plugin_owner_mismatch: c(403, "The credential does not own this plugin."),

  // --- JSON:API v2 ---
  invalid_document: c(400, "The body is not a valid JSON:API document for this resource."),
  invalid_parameter: c(400, "A query parameter is malformed or not supported."),
  invalid_filter: c(400, "A `filter[...]` names an unknown attribute or holds an invalid value."),
  invalid_fields: c(400, "A `fields[...]` sparse fieldset names an unknown type or attribute."),
  unstored_field: c(
    400,
    "The filter or sort names an attribute the table serving this resource does not store.",
  ),
  invalid_include: c(400, "`include` names a relationship the resource does not have."),
  invalid_reference: c(422, "A relationship points to a record that does not exist."),
  type_mismatch: c(409, "The document's `type` is not this endpoint's resource type."),
  id_mismatch: c(409, "The document's `id` differs from the id in the URL."),
  route_retired: c(410, "The v2 route was retired; the message names its replacement."),

  // --- SRQL and MCP ---
  invalid_query: c(400, "The SRQL query does not parse or plan; the message names the token and position."),
  query_timeout: c(503, "The query ran longer than the statement timeout."),
  invalid_pattern: c(422, "A user-supplied pattern is not a valid RE2 regular expression or is too complex."),
  invalid_arguments: c(400, "The MCP tool arguments do not match the tool's schema."),
  unknown_entity: c(404, "The MCP resource names no SRQL entity."),

  // --- monitoring ---
  invalid_config: c(400, "A check's configuration is invalid for its type; the message names the field."),
  check_disabled: c(409, "The check is disabled; enable it first."),
  managed_by_profile: c(409, "The check belongs to a monitoring profile; change the profile instead."),
  target_refused: c(
    400,
    "The outbound target is refused by the address policy (loopback, link-local, the core).",
  ),

  // --- telemetry ingest ---
  invalid_otlp: c(400, "The OTLP payload does not decode as the signal's protobuf or JSON message."),
  invalid_encoding: c(400, "The body's Content-Encoding could not be decoded."),
  unsupported_encoding: c(415, "The Content-Encoding is not gzip or identity."),
  body_too_large: c(413, "The OTLP body (after decompression) exceeds NETMON_OTLP_BODY_LIMIT."),
  body_incomplete: c(400, "The body ended before its declared length."),
  ingest_busy: c(503, "The ingest queue is full (NETMON_INGEST_MAX_PENDING); retry after Retry-After."),
  storage_unavailable: c(503, "Telemetry could not be stored just now; retry after Retry-After."),

  // --- operations: backup and restore ---
  invalid_backup: c(400, "The file is not a netmon backup, or it is damaged."),
  backup_too_new: c(400, "The backup was made by a newer netmon (more migrations) than this one."),
  backup_schema_mismatch: c(400, "The backup's tables do not match this version's schema."),
  backup_count_mismatch: c(409, "After the copy, a table's row count differs from the source's."),
  database_in_use: c(409, "The target database is in use by a running netmon."),
  database_not_empty: c(409, "The target database already holds data; pass --force to replace it."),
  // --- dashboard packages (spec 7's table) ---
  unauthorized: c(401, "Dashboard package routes: no, a revoked or an unknown bearer JWT."),
  missing_part: c(400, "A dashboard publish lacks its manifest or renderer part; `part` names which."),
  invalid_route: c(400, "The route slug does not match ^[a-z0-9][a-z0-9-]{1,62}$."),
  invalid_manifest: c(400, "The dashboard manifest fails the closed schema; `errors` lists every problem."),
  slug_in_use: c(409, "The route is bound to an enabled package of another dashboard id."),
  version_already_published: c(
    409,
    "The same dashboard id@version exists with other bytes and is enabled or verified.",
  ),
  unprocessable_renderer: c(
    422,
    "manifest.renderer.sha256 differs from the SHA-256 of the uploaded renderer.",
  ),
  verification_required: c(409, "Only a verified dashboard package can be enabled."),
} as const satisfies Record<string, ErrorCodeSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;
