/**
 * Checks use the one outbound guard (src/kernel/net/outbound-policy.ts); this name stays for
 * the monitoring code that has always called it a target policy.
 */
export {
  isLinkLocal,
  OutboundPolicy as TargetPolicy,
  type OutboundPolicyOptions as TargetPolicyOptions,
  TargetRefusedError,
} from "../kernel/net/outbound-policy.ts";
