/** Alerting's JSON:API declarations (imported once by src/jsonapi/resources.ts). */
import "./alerts.ts";
import "./notifications.ts";
import "./rules.ts";
import "./silences.ts";
