/**
 * Every module that declares JSON:API resources, imported for its side effect
 * (`registerResource(...)`). Each domain appends ONE line here for its declaration module.
 * The JSON:API feature imports this file before it builds routes, so the order of the lines
 * does not matter.
 */
import "../monitoring/infrastructure/resources.ts";
import "../telemetry/resources.ts";
import "../monitoring/resources/index.ts";
import "../alerting/resources/index.ts";
import "../inventory/resources/index.ts";
