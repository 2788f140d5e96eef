import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two cores: each test file may hold an embedded PostgreSQL; more workers only thrash.
    maxWorkers: 2,
    reporters: process.env.CI_JSON_REPORT
      ? ["default", ["json", { outputFile: process.env.CI_JSON_REPORT }]]
      : ["default"],
  },
});
