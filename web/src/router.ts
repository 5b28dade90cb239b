// Every view has a URL. The UI lives at `/` and routes on the hash, so that its paths
// never collide with the API's (`/#/jobs/ID` is the UI's job page, `/jobs/ID` the API's).
//
//   #/jobs?state=FAILED&q=tag:nightly&page=2   the jobs list, filtered
//   #/jobs/ID?task=TID&attempt=2&tab=log        a job, a task of it, an attempt
//   #/editor?from=JOBID | #/editor?schedule=1   the editor (new, duplicate, scheduled)
//   #/scheduled  #/scheduled/ID  #/queues  #/nodes  #/login
import { useEffect, useState } from "preact/hooks";

export interface Route {
  path: string[];                 // "#/jobs/abc" → ["jobs", "abc"]
  params: Record<string, string>; // the query after the path
}

export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#\/?/, "");
  const [p, q = ""] = raw.split("?", 2);
  const path = p.split("/").filter(Boolean).map(decodeURIComponent);
  const params: Record<string, string> = {};
  new URLSearchParams(q).forEach((v, k) => { params[k] = v; });
  return { path: path.length ? path : ["jobs"], params };
}

export function href(path: string | string[], params: Record<string, string | number | undefined> = {}) {
  const parts = Array.isArray(path) ? path : [path];
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return `#/${parts.map(encodeURIComponent).join("/")}${s ? `?${s}` : ""}`;
}

export function navigate(path: string | string[], params: Record<string, string | number | undefined> = {},
                         replace = false) {
  const h = href(path, params);
  if (replace) history.replaceState(null, "", h);
  else history.pushState(null, "", h);
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    window.addEventListener("hashchange", on);
    window.addEventListener("popstate", on);
    return () => { window.removeEventListener("hashchange", on); window.removeEventListener("popstate", on); };
  }, []);
  return route;
}
