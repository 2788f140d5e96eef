import { defineConfig } from "vite";

// The console is a static bundle the core serves from web/dist (see docs/decisions/0700-console.md).
// JSX goes through Vite's own transformer with Preact's runtime: no Babel, no plugin.
export default defineConfig({
  root: import.meta.dirname,
  base: "/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // One chart library chunk loaded only by pages that draw charts keeps the first page small.
    chunkSizeWarningLimit: 200,
  },
  server: {
    proxy: {
      "/api": "http://localhost:4000",
      "/users": "http://localhost:4000",
      "/health": "http://localhost:4000",
    },
  },
});
