import { describe, expect, it } from "vitest";
import { FORWARDABLE } from "./cli-channel.ts";
import { COMMANDS } from "./commands.ts";

/**
 * Every command that works on the database must reach a running server over the local channel
 * (on the embedded database the server holds the only connection): a command added without
 * being listed failed with "the data directory is in use" while `netmon serve` ran, as
 * `netmon dashboard keys add` and `netmon checks composite` did.
 */
const RUN_THEIR_OWN_PROCESS = new Set(["serve", "gateway", "agent", "mcp"]);
// They replace or read a whole database and need the server stopped.
const NEED_THE_SERVER_STOPPED = new Set(["restore", "db"]);

describe("the CLI's local channel", () => {
  it("forwards every command except the long-running ones and those that need the server stopped", () => {
    for (const c of COMMANDS) {
      const expected = !RUN_THEIR_OWN_PROCESS.has(c.name) && !NEED_THE_SERVER_STOPPED.has(c.name);
      expect(FORWARDABLE.has(c.name), c.name).toBe(expected);
    }
  });
});
