/** OCSF 1.7.0 device.type_id captions (reference §5.4). */
export const DEVICE_TYPES: Record<number, string> = {
  0: "Unknown",
  1: "Server",
  2: "Desktop",
  3: "Laptop",
  4: "Tablet",
  5: "Mobile",
  6: "Virtual",
  7: "IOT",
  8: "Browser",
  9: "Firewall",
  10: "Switch",
  11: "Hub",
  12: "Router",
  13: "IDS",
  14: "IPS",
  15: "Load Balancer",
  99: "Other",
};

const BY_NAME = new Map<string, number>(
  Object.entries(DEVICE_TYPES).map(([id, name]) => [name.toLowerCase(), Number(id)]),
);
BY_NAME.set("iot", 7);
BY_NAME.set("loadbalancer", 15);
BY_NAME.set("load_balancer", 15);
BY_NAME.set("vm", 6);
BY_NAME.set("virtual machine", 6);
BY_NAME.set("phone", 5);

/** Map a free-text type to {type_id, type}: known captions normalise, anything else is 99 Other. */
export function classifyType(text: string | null | undefined): { type_id: number; type: string | null } {
  if (text == null || text.trim() === "") return { type_id: 0, type: null };
  const t = text.trim();
  const id = BY_NAME.get(t.toLowerCase());
  if (id !== undefined) return { type_id: id, type: DEVICE_TYPES[id] as string };
  return { type_id: 99, type: t };
}

export function isDeviceTypeId(n: number): boolean {
  return DEVICE_TYPES[n] !== undefined;
}
