// The shell: navigation, the live indicator, sign-in, global keys, the help overlay, and
// the view the URL names.
import { useEffect, useRef, useState } from "preact/hooks";
import { useFocusTrap } from "./components/focusTrap";
import { navigate, useRoute } from "./router";
import { api, onUnauthorized } from "./api";
import { onStreamStatus, streamStatus, type StreamStatus } from "./events";
import { checkAuth, logout, requireLogin, useAuth } from "./auth";
import { installKeys, KEY_HELP, useKeys } from "./keys";
import { JobsPage } from "./pages/JobsPage";
import { ScheduledPage } from "./pages/ScheduledPage";
import { QueuesPage } from "./pages/QueuesPage";
import { NodesPage } from "./pages/NodesPage";
import { LoginPage } from "./pages/LoginPage";
import "./pages/pages.css";
import type { FunctionComponent } from "preact";

// The editor (CodeMirror, most of the UI's code) and the job page (with the graph's layout
// library) load only when first opened, so that the jobs list's first screen stays small.
function lazyPage<P extends object>(load: () => Promise<FunctionComponent<P>>, what: string) {
  let loaded: FunctionComponent<P> | null = null;
  return function LazyPage(props: P) {
    const [C, setC] = useState<FunctionComponent<P> | null>(() => loaded);
    const [error, setError] = useState<string>();
    useEffect(() => {
      if (C) return;
      load().then((m) => { loaded = m; setC(() => m); }, (e) => setError(String(e)));
    }, []);
    if (error) return <div class="ui-error" role="alert">The {what} could not load: {error}</div>;
    return C ? <C {...props} /> : <p class="ui-muted">Loading the {what}…</p>;
  };
}
const EditorPage = lazyPage<{ params: Record<string, string> }>(
  () => import("./pages/EditorPage").then((m) => m.EditorPage), "editor");
const JobPage = lazyPage<{ id: string; params: Record<string, string> }>(
  () => import("./job/JobPage").then((m) => m.JobPage), "job page");

function LiveIndicator() {
  const [status, setStatus] = useState<StreamStatus>(streamStatus());
  useEffect(() => onStreamStatus(setStatus), []);
  const text = { live: "Live", polling: "Polling", connecting: "Connecting", idle: "Idle" }[status];
  const title = {
    live: "Updates arrive as they happen (event stream connected)",
    polling: "The event stream is not connected: this page polls the server every few seconds",
    connecting: "Connecting to the event stream",
    idle: "This page does not follow live updates",
  }[status];
  return (
    <span class={`ui-live ui-live-${status}`} title={title} role="status" aria-live="polite">
      <span class="ui-live-dot" aria-hidden="true" />{text}
    </span>
  );
}

function HelpOverlay({ onClose }: { onClose: () => void }) {
  const box = useRef<HTMLDivElement>(null);
  useFocusTrap(box);
  useEffect(() => {
    const before = document.activeElement as HTMLElement | null;
    return () => before?.focus?.();
  }, []);
  useKeys({ escape: () => { onClose(); }, help: () => { onClose(); } });
  return (
    <div class="ui-overlay" onClick={(e) => { if (e.target === e.currentTarget) onClose(); }}>
      <div class="ui-dialog" role="dialog" aria-modal="true" aria-labelledby="ui-help-title" ref={box}>
        <h2 id="ui-help-title">Keyboard shortcuts</h2>
        <table class="ui-keys">
          <tbody>
            {KEY_HELP.map((k) => (
              <tr key={k.keys}><td>{k.keys.split(" ").map((p, i, all) =>
                // In "j / k" the slash separates two keys; alone, it is the key.
                p === "/" && all.length > 1 ? " / " : <>{i > 0 && all[i - 1] !== "/" && " "}<kbd>{p}</kbd></>)}</td><td>{k.what}</td></tr>
            ))}
          </tbody>
        </table>
        <p class="ui-muted">Keys other than Esc are ignored while you type in a field or the editor.</p>
        <div class="ui-dialog-actions"><button type="button" class="primary" autoFocus onClick={onClose}>Close</button></div>
      </div>
    </div>
  );
}

export function App() {
  const route = useRoute();
  const auth = useAuth();
  const [help, setHelp] = useState(false);
  useEffect(() => {
    void checkAuth();
    const off = onUnauthorized(requireLogin);
    const offKeys = installKeys();
    return () => { off(); offKeys(); };
  }, []);
  useKeys({
    help: () => { setHelp(true); },
    "new-job": () => { navigate("editor"); },
    "go-jobs": () => { navigate("jobs"); },
    "go-scheduled": () => { navigate("scheduled"); },
    "go-queues": () => { navigate("queues"); },
    "go-nodes": () => { navigate("nodes"); },
  });
  const [top, id, sub] = route.path;
  let view;
  if (auth.kind === "checking") view = <p class="ui-muted">Connecting…</p>;
  else if (auth.kind === "login") view = <LoginPage error={auth.error} />;
  else switch (top) {
    case "jobs":
      view = id ? <JobPage id={id} params={route.params} /> : <JobsPage params={route.params} />;
      break;
    case "editor": view = <EditorPage params={route.params} />; break;
    case "scheduled":
      view = id && sub === "edit" ? <EditorPage params={{ ...route.params, schedule: "1", edit: id }} />
        : <ScheduledPage id={id} params={route.params} />;
      break;
    case "tasks": view = <TaskLink id={id ?? ""} />; break;
    case "queues": view = <QueuesPage />; break;
    case "nodes": view = <NodesPage />; break;
    default: view = <JobsPage params={route.params} />;
  }
  const identity = auth.kind === "ready" ? auth.identity : undefined;
  useEffect(() => {
    const names: Record<string, string> = { jobs: id ? "Job" : "Jobs", editor: "Editor", scheduled: "Scheduled jobs",
                                            queues: "Queues", nodes: "Nodes" };
    document.title = auth.kind === "login" ? "Sign in · Baton" : `${names[top] ?? "Jobs"} · Baton`;
  }, [top, id, auth.kind]);
  return (
    <div class="shell">
      <header class="topbar">
        <a class="brand" href="#/jobs">Baton</a>
        <nav aria-label="Main">
          <a href="#/jobs" aria-current={top === "jobs" ? "page" : undefined}>Jobs</a>
          <a href="#/scheduled" aria-current={top === "scheduled" ? "page" : undefined}>Scheduled</a>
          <a href="#/queues" aria-current={top === "queues" ? "page" : undefined}>Queues</a>
          <a href="#/nodes" aria-current={top === "nodes" ? "page" : undefined}>Nodes</a>
          <a class="button primary" href="#/editor">New job</a>
        </nav>
        <div class="ui-topbar-right">
          <LiveIndicator />
          <button type="button" class="ui-icon-button" aria-label="Keyboard shortcuts" title="Keyboard shortcuts (?)"
                  onClick={() => setHelp(true)}>?</button>
          {identity?.authEnabled && (
            <span class="ui-user">
              <span title={identity.roles.length ? `roles: ${identity.roles.join(", ")}` : "no roles"}>{identity.username}</span>
              <button type="button" onClick={logout}>Sign out</button>
            </span>
          )}
        </div>
      </header>
      <main>{view}</main>
      {help && <HelpOverlay onClose={() => setHelp(false)} />}
    </div>
  );
}

// `#/tasks/TID`: a task's page is its job's, with the task selected. A sub-job names the
// task that started it (its `parentId`), not that task's job, so links to a sub-job's
// parent come here.
function TaskLink(props: { id: string }) {
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    api.task(props.id).then(
      (t) => { if (live) navigate(["jobs", t.jobId], { task: props.id }, true); },
      (e: Error) => { if (live) setError(e.message); });
    return () => { live = false; };
  }, [props.id]);
  return error ? <p class="ui-muted" role="alert">{error}</p> : <p class="ui-muted">Opening the task…</p>;
}
