// Baton's web UI. `make` builds it into BATON_WEB_OUT (default dist/), and CMake embeds
// that folder into the binary (src/web/). `npm run dev` serves it with the API proxied to
// a `baton run standalone` on localhost:8000.
/// <reference types="vitest/config" />
import { defineConfig } from "vite";

const api = process.env.BATON_API ?? "http://127.0.0.1:8000";
const apiPaths = ["/jobs", "/tasks", "/queues", "/nodes", "/metrics", "/health", "/events",
  "/scheduled-jobs", "/users", "/keys"];

export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  base: "./",
  build: {
    outDir: process.env.BATON_WEB_OUT ?? "dist",
    emptyOutDir: true,
    // One file per asset type keeps the embedded table small; hashes make them cacheable.
    assetsDir: "assets",
    chunkSizeWarningLimit: 1500,
  },
  server: { proxy: Object.fromEntries(apiPaths.map((p) => [p, api])) },
  test: { include: ["src/**/*.test.ts"] },
});
