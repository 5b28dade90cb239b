// The job page: header (state, timing, inputs, result or error, actions), a tab bar
// (graph | timeline | definition), and the selected task's panel with its live log.
// URL: #/jobs/ID?tab=timeline&task=TID&attempt=N (tab: graph, timeline, definition, log)
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, ApiError, type Job, type Plan, type RerunMode, type TaskRow } from "../api";
import { subscribe, type JobEvent, type TaskEvent } from "../events";
import { applyEvents } from "./live";
import { href, navigate } from "../router";
import { isGraphJob, jobGraph, nodeOfTask, type GraphNode } from "./graph";
import { Graph } from "./Graph";
import { Refetcher, refetchInterval } from "./refetch";
import { TaskPanel } from "./TaskPanel";
import { buildTimeline, duration, type Timeline as TimelineModel } from "./timeline";
import { Timeline } from "./Timeline";
import type { LogListener } from "./LogView";
import { fmtTime, StateBadge } from "./ui";
import { definitionOf, toYaml } from "../pages/yaml";
import { canPause } from "../pages/jobsFilter";
import { ACTIVE_JOB_STATES } from "../states";
import "./job.css";

const TABS = [["graph", "Graph"], ["timeline", "Timeline"], ["definition", "Definition"]] as const;
type Tab = (typeof TABS)[number][0];

export function JobPage(props: { id: string; params: Record<string, string> }) {
  const { id, params } = props;
  // `tab=log` is the graph with the task panel scrolled to its log.
  const tab: Tab = (TABS.some(([t]) => t === params.tab) ? params.tab : "graph") as Tab;
  const [job, setJob] = useState<Job | null>(null);
  const [error, setError] = useState<{ status: number; message: string } | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [rerunMode, setRerunMode] = useState<RerunMode | null>(null);
  const [now, setNow] = useState(() => Date.now());
  const [pollTick, setPollTick] = useState(0);
  const rowsRef = useRef(0);
  const activeRef = useRef(true);
  const logListeners = useRef(new Set<LogListener>());

  // The job shown, and the job and task events since the read in flight began (they may
  // be newer than what it answers, and are applied over it).
  const jobRef = useRef<Job | null>(null);
  const recent = useRef<{ seq: number; e: JobEvent | TaskEvent }[]>([]);
  const seq = useRef(0);
  const show = (j: Job) => {
    jobRef.current = j;
    rowsRef.current = j.execution?.length ?? 0;
    activeRef.current = ACTIVE_JOB_STATES.has(j.state);
    setJob(j);
  };

  // A read still in flight when the page moves to another job (a sub-job's link) must not
  // show the job it was for: its answer is dropped.
  const shownId = useRef(id);
  shownId.current = id;
  const fetchJob = useCallback(async () => {
    const from = seq.current;
    try {
      let j = await api.job(id);
      if (shownId.current !== id) return;
      recent.current = recent.current.filter((x) => x.seq > from);
      if (recent.current.length) j = applyEvents(j, recent.current.map((x) => x.e), new Date().toISOString()).job;
      show(j);
      setError(null);
    } catch (e) {
      if (shownId.current !== id) return;
      const err = e as ApiError;
      setError({ status: err.status ?? 0, message: err.message ?? String(e) });
    }
  }, [id]);

  // Live: job and task events are applied to the job at once (batched: 200 ms, 1 s for a
  // big job) and ask for a throttled read of the whole job (timestamps, results, new
  // rows); log parts go to the open log. Each poll reads the job (a finished one only every
  // fifth poll) and the open log's newest page.
  useEffect(() => {
    setJob(null); setError(null);
    jobRef.current = null; recent.current = [];
    const refetcher = new Refetcher(fetchJob, (last) => refetchInterval(rowsRef.current, last));
    refetcher.request();
    let polls = 0;
    let pending: (JobEvent | TaskEvent)[] = [];
    let flushTimer: ReturnType<typeof setTimeout> | null = null;
    const flush = () => {
      flushTimer = null;
      const cur = jobRef.current, events = pending;
      pending = [];
      if (!cur) return; // the first read brings it all
      const r = applyEvents(cur, events, new Date().toISOString());
      if (r.job !== cur) show(r.job);
    };
    const sub = subscribe({
      jobId: id,
      onEvent: (e) => {
        if (e.type === "log") logListeners.current.forEach((f) => f(e));
        else if (e.jobId === id) {
          recent.current.push({ seq: ++seq.current, e });
          pending.push(e);
          // A big job's graph and timeline are rebuilt at most once a second.
          if (!flushTimer) flushTimer = setTimeout(flush, rowsRef.current > 2000 ? 1000 : 200);
          refetcher.request(e.type === "job" && !ACTIVE_JOB_STATES.has(e.state));
        }
      },
      // While the stream is down, every few seconds; while live, every 15 s and after a
      // resync (events.ts).
      onPoll: () => {
        polls++;
        if (activeRef.current || polls % 5 === 0) refetcher.request();
        setPollTick((t) => t + 1);
      },
    });
    return () => { sub.close(); refetcher.close(); if (flushTimer) clearTimeout(flushTimer); };
  }, [id]);

  // A sub-job's parentId is the id of its parent's `subjob` task: the task names the job.
  const [parentJob, setParentJob] = useState<{ jobId: string; taskId?: string } | null>(null);
  const parentId = job?.parentId;
  useEffect(() => {
    setParentJob(null);
    if (!parentId) return;
    let gone = false;
    api.task(parentId)
      .then((t) => { if (!gone) setParentJob({ jobId: t.jobId, taskId: t.id }); })
      .catch(() => { if (!gone) setParentJob({ jobId: parentId }); });
    return () => { gone = true; };
  }, [parentId]);

  const active = !!job && ACTIVE_JOB_STATES.has(job.state);
  useEffect(() => {
    if (job) document.title = `${job.name ?? "Job"} · ${job.state.toLowerCase()} · Baton`;
  }, [job?.name, job?.state]);
  useEffect(() => {
    if (!active) { setNow(Date.now()); return; }
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [active]);

  const listen = useCallback((f: LogListener) => {
    logListeners.current.add(f);
    return () => { logListeners.current.delete(f); };
  }, []);

  // A graph job's edges come from its plan (POST /jobs/plan, read once per job): the
  // server's rules, not the UI's, say what each task needs.
  const [plan, setPlan] = useState<{ id: string; plan: Plan } | null>(null);
  const wantsPlan = !!job && job.id === id && isGraphJob(job);
  useEffect(() => {
    if (!wantsPlan || !job || plan?.id === id) return;
    let gone = false;
    const definition = { name: job.name ?? "job", mode: job.mode, tasks: job.tasks };
    api.plan(JSON.stringify(definition))
      .then((p) => { if (!gone) setPlan({ id, plan: p }); })
      .catch(() => undefined);  // without it, the tasks are drawn without their edges
    return () => { gone = true; };
  }, [id, wantsPlan]);
  const graph = useMemo(() => (job ? jobGraph(job, plan?.id === id ? plan.plan : null) : null), [job, plan, id]);
  // The timeline's model is built after the frame that shows the tab (an effect runs after
  // paint): a click on the tab is answered at once, and a 10,000-row job's model follows.
  const [timeline, setTimeline] = useState<TimelineModel | null>(null);
  useEffect(() => {
    setTimeline(job && tab === "timeline" ? buildTimeline(job.execution ?? [], Date.now()) : null);
  }, [job, tab]);
  const selectedNode = graph ? nodeOfTask(graph, params.task) : undefined;

  const setParams = (p: Record<string, string | undefined>, replace = false) =>
    navigate(["jobs", id], { ...params, ...p }, replace);
  const selectNode = (n: GraphNode) => {
    const last = n.attempts[n.attempts.length - 1];
    if (last) setParams({ task: last.id, attempt: undefined });
  };
  const closePanel = () => setParams({ task: undefined, attempt: undefined });

  // Esc closes the task panel.
  useEffect(() => {
    if (!params.task) return;
    const onKey = (e: KeyboardEvent) => { if (e.key === "Escape" && !e.defaultPrevented) closePanel(); };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [params.task, params.tab, params.attempt]);

  const act = async (what: "cancel" | "restart" | "pause" | "resume" | "rerun") => {
    setBusy(what); setActionError(null);
    try {
      if (what === "rerun") {
        await api.rerun(id, { mode: rerunMode ?? (job?.state === "COMPLETED" ? "all" : "failed_only") });
      } else {
        await api[what](id);
      }
      await fetchJob();
    } catch (e) { setActionError(`${what}: ${(e as Error).message}`); }
    finally { setBusy(null); }
  };

  if (error && !job) {
    return (
      <div class="job-page">
        <p class="job-error" role="alert">{error.status === 404 ? `No job ${id}.` : `Could not load the job: ${error.message}`}</p>
        <a href={href("jobs")}>← All jobs</a>
      </div>);
  }
  if (!job || !graph) {
    return <div class="job-page" aria-busy="true"><p class="job-muted job-loading">Loading the job…</p></div>;
  }

  const started = Date.parse(job.startedAt ?? "");
  const ended = Date.parse(job.completedAt ?? job.failedAt ?? "");
  const took = Number.isNaN(started) ? undefined : (Number.isNaN(ended) ? (active ? now : undefined) : ended) ;
  const canRestart = job.state === "FAILED" || job.state === "CANCELLED";
  // A finished top-level job runs again (a sub-job with its top-level job).
  const canRerun = !job.parentId && (canRestart || job.state === "COMPLETED");
  const mode: RerunMode = rerunMode ?? (job.state === "COMPLETED" ? "all" : "failed_only");
  const inputs = job.inputs && Object.keys(job.inputs).length ? job.inputs : undefined;

  return (
    <div class={`job-page${params.task ? " job-with-panel" : ""}`}>
      <header class="job-head">
        <div class="job-title">
          <h1>{job.name ?? "(unnamed job)"}</h1>
          <StateBadge state={job.state} />
          {job.ending && <span class="job-ending" role="status">cleaning up · ends {job.ending.toLowerCase()}</span>}
        </div>
        <div class="job-actions">
          {active && <button type="button" class="job-danger" onClick={() => act("cancel")} disabled={!!busy}>{busy === "cancel" ? "Cancelling…" : "Cancel"}</button>}
          {canPause(job.state) && <button type="button" onClick={() => act("pause")} disabled={!!busy} title="Running tasks finish; nothing new starts until it is resumed">{busy === "pause" ? "Pausing…" : "Pause"}</button>}
          {job.state === "PAUSED" && <button type="button" class="primary" onClick={() => act("resume")} disabled={!!busy}>{busy === "resume" ? "Resuming…" : "Resume"}</button>}
          {canRestart && <button type="button" class="primary" onClick={() => act("restart")} disabled={!!busy}>{busy === "restart" ? "Restarting…" : "Restart"}</button>}
          {canRerun && (
            <span class="job-rerun">
              <select aria-label="Which tasks run again" value={mode}
                onChange={(e) => setRerunMode((e.target as HTMLSelectElement).value as RerunMode)}>
                {job.state !== "COMPLETED" && <option value="failed_only">failed tasks</option>}
                {job.state !== "COMPLETED" && <option value="from_failed">from the failed ones</option>}
                <option value="all">all tasks</option>
              </select>
              <button type="button" onClick={() => act("rerun")} disabled={!!busy}
                title="Run the job again as new attempts; the other tasks keep their results">{busy === "rerun" ? "Rerunning…" : "Rerun"}</button>
            </span>)}
          <a class="button" href={href("editor", { from: id })}>Duplicate as new</a>
        </div>
        {actionError && <p class="job-error" role="alert">{actionError}</p>}
        {error && <p class="job-error" role="status">Could not refresh the job ({error.message}); showing what was read last.</p>}
        {job.description && <p class="job-desc">{job.description}</p>}
        <dl class="job-facts job-facts-wide">
          <dt>Created</dt><dd>{fmtTime(job.createdAt)}</dd>
          <dt>Started</dt><dd>{fmtTime(job.startedAt)}</dd>
          <dt>{job.failedAt ? "Failed" : "Ended"}</dt><dd>{fmtTime(job.failedAt ?? job.completedAt)}</dd>
          <dt>Duration</dt><dd class="job-num">{took !== undefined ? duration(took - started) : "—"}</dd>
          <dt>Task</dt><dd class="job-num">{Math.min(job.position, job.taskCount)} of {job.taskCount}</dd>
          <dt>Progress</dt>
          <dd>
            <span class="job-progress job-progress-inline" role="progressbar" aria-valuemin={0} aria-valuemax={100}
                  aria-valuenow={Math.round(job.progress ?? 0)} aria-label="Job progress">
              <span class={`job-s-${job.state}`} style={{ width: `${Math.min(100, job.progress ?? 0)}%` }} />
            </span>
            <span class="job-num">{Math.round(job.progress ?? 0)}%</span>
          </dd>
          {job.parentId && <><dt>Parent</dt><dd>{parentJob
            ? <a href={href(["jobs", parentJob.jobId], { task: parentJob.taskId })}>parent job ↗</a>
            : <span class="job-muted">…</span>}</dd></>}
          {job.schedule && <><dt>Schedule</dt><dd><a href={href(["scheduled", job.schedule.id])}>{job.schedule.cron}</a></dd></>}
          {job.createdBy?.username && <><dt>By</dt><dd>{job.createdBy.username}</dd></>}
          {job.tags?.length ? <><dt>Tags</dt><dd>{job.tags.map((t) => <a key={t} class="job-tag" href={href("jobs", { q: `tag:${t}` })}>{t}</a>)}</dd></> : null}
          <dt>Id</dt><dd><code class="job-id">{job.id}</code></dd>
        </dl>
        {inputs && (
          <details class="job-inputs" open={Object.keys(inputs).length <= 6}>
            <summary>Inputs ({Object.keys(inputs).length})</summary>
            <table class="job-kv"><tbody>
              {Object.entries(inputs).map(([k, v]) => <tr key={k}><th scope="row">{k}</th><td>{v}</td></tr>)}
            </tbody></table>
          </details>
        )}
        {job.error && (
          <section class="job-section"><h3>Error</h3><pre class="job-pre job-error-text job-outcome">{job.error}</pre></section>)}
        {job.result !== undefined && job.result !== "" && (
          <section class="job-section"><h3>Result</h3><pre class="job-pre job-outcome">{job.result}</pre></section>)}
      </header>

      <nav class="job-tabs" role="tablist" aria-label="Views of the job">
        {TABS.map(([t, label]) => (
          <a key={t} role="tab" aria-selected={tab === t} href={href(["jobs", id], { ...params, tab: t === "graph" ? undefined : t })}
             onClick={(e) => { e.preventDefault(); setParams({ tab: t === "graph" ? undefined : t }, true); }}>{label}</a>
        ))}
      </nav>

      <div class="job-body">
        <div class="job-main" role="tabpanel">
          {tab === "graph" && <Graph key={id} model={graph} selected={selectedNode?.id} onSelect={selectNode} />}
          {tab === "timeline" && !timeline && (
            <p class="job-tl-building" role="status">Laying out {(job.execution?.length ?? 0).toLocaleString("en-US")} rows…</p>
          )}
          {tab === "timeline" && timeline && (
            <Timeline key={id} model={timeline} now={now} active={active} selected={params.task}
                      minRows={graph.nodes.filter((n) => n.kind !== "join").length}
                      onSelect={(taskId) => setParams({ task: taskId, attempt: undefined })} />
          )}
          {tab === "definition" && <Definition key={id} job={job} />}
        </div>
        {params.task && (
          <TaskPanel job={job} taskId={params.task} attempt={params.attempt ? Number(params.attempt) : undefined}
                     now={now} pollTick={pollTick} listen={listen} focusLog={params.tab === "log"}
                     onAttempt={(r: TaskRow) => setParams({ task: r.id, attempt: String((r.retry?.attempts ?? 0) + 1) }, true)}
                     onSelect={(taskId) => setParams({ task: taskId, attempt: undefined })}
                     onChanged={() => { void fetchJob(); }}
                     onClose={closePanel} />
        )}
      </div>
    </div>
  );
}

function Definition(props: { job: Job }) {
  const [format, setFormat] = useState<"yaml" | "json">("yaml");
  const [copied, setCopied] = useState(false);
  useEffect(() => setCopied(false), [format]);
  const text = useMemo(() => {
    const d = definitionOf(props.job);
    return format === "yaml" ? toYaml(d) : JSON.stringify(d, null, 2);
  }, [props.job, format]);
  return (
    <div class="job-def">
      <div class="job-def-tools" role="group" aria-label="Format">
        <button type="button" aria-pressed={format === "yaml"} onClick={() => setFormat("yaml")}>YAML</button>
        <button type="button" aria-pressed={format === "json"} onClick={() => setFormat("json")}>JSON</button>
        {navigator.clipboard && (
          // The clipboard exists only in a secure context (https or localhost).
          <button type="button" onClick={() => { void navigator.clipboard.writeText(text).then(() => setCopied(true)); }}>
            {copied ? "Copied" : "Copy"}
          </button>)}
        <span class="job-muted">read-only · secrets as the server shows them</span>
      </div>
      <pre class="job-pre job-def-text" tabIndex={0} aria-label="Job definition">{text}</pre>
    </div>
  );
}
