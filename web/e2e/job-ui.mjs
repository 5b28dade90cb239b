// Where the job page tests load the UI from: BATON_UI_URL when set; the server itself when
// it serves the UI at `/` (the binary embeds the UI built from this tree); otherwise, or
// with BATON_UI_DEV=1 (to test the sources without rebuilding the binary), a Vite dev
// server started here, proxying the API to the test's own server.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./lib.mjs";

const web = join(dirname(fileURLToPath(import.meta.url)), "..");

export async function startUi(server) {
  const same = { url: (u) => u, close: async () => {} };
  if (process.env.BATON_UI_URL) return same;
  if (process.env.BATON_UI_DEV !== "1") {
    const r = await fetch(`${server.url}/`).catch(() => null);
    if (r?.ok && (r.headers.get("content-type") ?? "").includes("text/html")) return same;
  }
  process.env.BATON_API = server.url;
  const { createServer } = await import("vite");
  const port = await freePort();
  const vite = await createServer({ root: web, configFile: join(web, "vite.config.ts"), logLevel: "warn",
                                    server: { port, strictPort: true, host: "127.0.0.1" } });
  await vite.listen();
  return {
    url: (u) => u.replace(server.url, `http://127.0.0.1:${port}`),
    close: () => vite.close(),
  };
}
