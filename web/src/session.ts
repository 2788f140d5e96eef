import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Me } from "./api.ts";

export const SessionContext = createContext<Me | null>(null);

export function useMe(): Me {
  const me = useContext(SessionContext);
  if (!me) throw new Error("session not loaded");
  return me;
}

/** Whether the signed-in user holds a permission (the server decides; this only hides buttons). */
export function useCan(): (permission: string) => boolean {
  const me = useContext(SessionContext);
  return (p) => me?.permissions.includes(p) ?? false;
}
