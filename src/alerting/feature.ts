import type { Feature } from "../kernel/feature.ts";
import { Notifier, type NotifierOptions } from "./notifier.ts";

/**
 * The alerting domain's process hook: the notifier (routing, escalation, delivery retries,
 * stateful-rule recovery). Its JSON:API resources are declared in src/alerting/resources/
 * and served by the JSON:API feature.
 */
export function alertingFeature(opts: NotifierOptions = {}): Feature & { notifier(): Notifier | null } {
  let notifier: Notifier | null = null;
  return {
    name: "alerting",
    start(ctx) {
      notifier = new Notifier(ctx, opts);
      notifier.start();
    },
    async stop() {
      await notifier?.stop();
      notifier = null;
    },
    notifier: () => notifier,
  };
}
