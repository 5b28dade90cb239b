// The selected task: what it is, where and when it ran, each attempt, its evaluated env
// (secrets arrive redacted), files, command, result, error, progress, and its live log.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, type Job, type TaskRow } from "../api";
import { href } from "../router";
import { attemptNumber, eachSummary } from "./graph";
import { reasonText, taskDetails, waitText } from "./panel";
import { duration } from "./timeline";
import { LogView, type LogListener } from "./LogView";
import { fmtTime, StateBadge } from "./ui";

export function TaskPanel(props: { job: Job; taskId: string; attempt?: number; now: number; pollTick: number;
                                   focusLog?: boolean;
                                   listen: (f: LogListener) => () => void;
                                   onAttempt: (row: TaskRow) => void; onSelect: (taskId: string) => void;
                                   onChanged?: () => void; onClose: () => void }) {
  const rows = props.job.execution ?? [];
  const { attempts, row, parent, kids, counts } = useMemo(() => taskDetails(rows, props.taskId, props.attempt),
                                                          [props.job, props.taskId, props.attempt]);
  // On a narrow screen the panel is below the view: bring it into sight when a task is picked.
  const ref = useRef<HTMLElement>(null);
  const logRef = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (props.focusLog && logRef.current) logRef.current.scrollIntoView({ block: "start" });
    else if (window.innerWidth <= 900) ref.current?.scrollIntoView({ block: "start" });
  }, [props.taskId, !!row]);
  if (!row) {
    return (
      <aside class="job-panel" aria-label="Task" ref={ref}>
        <div class="job-panel-head"><h2>Task</h2><CloseButton onClose={props.onClose} /></div>
        <p class="job-muted">This task is not in the job (yet).</p>
      </aside>);
  }
  const started = Date.parse(row.startedAt ?? "");
  const ended = Date.parse(row.completedAt ?? row.failedAt ?? "");
  const active = ["CREATED", "PENDING", "SCHEDULED", "RUNNING"].includes(row.state);
  const took = Number.isNaN(started) ? undefined : (Number.isNaN(ended) ? (active ? props.now : undefined) : ended) ;
  const composite = !!(row.parallel || row.each || row.subjob || row.wait);
  const subjobId = (row.subjob as { id?: string } | undefined)?.id;
  const shownKids = kids.slice(0, 100);

  return (
    <aside class="job-panel" aria-label={`Task ${row.name ?? ""}`} ref={ref}>
      <div class="job-panel-head">
        <h2 title={row.name}>{row.name ?? "(unnamed)"}</h2>
        <StateBadge state={row.state} />
        <CloseButton onClose={props.onClose} />
      </div>
      {attempts.length > 1 && (
        <div class="job-attempts" role="group" aria-label="Attempts">
          <span class="job-muted">Attempt</span>
          {attempts.map((a) => (
            <button type="button" key={a.id} class={`job-attempt job-s-${a.state}`} aria-pressed={a.id === row.id}
                    title={a.state.toLowerCase()} onClick={() => props.onAttempt(a)}>
              {attemptNumber(a)}<span class="job-sr"> ({a.state.toLowerCase()})</span>
            </button>))}
        </div>
      )}
      <div class="job-progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(row.progress ?? 0)}
           aria-label="Task progress">
        <span class={`job-s-${row.state}`} style={{ width: `${Math.min(100, Math.max(0, row.progress ?? 0))}%` }} />
      </div>
      <dl class="job-facts">
        {!composite && <>
          <dt>Node</dt><dd>{row.nodeId ? <a href={href("nodes")} title={row.nodeId}>{row.nodeId.slice(-8)}</a> : "—"}</dd>
          <dt>Queue</dt><dd>{row.queue ?? "—"}</dd>
        </>}
        <dt>Created</dt><dd>{fmtTime(row.createdAt)}</dd>
        {!composite && <><dt>Scheduled</dt><dd>{fmtTime(row.scheduledAt)}</dd></>}
        <dt>Started</dt><dd>{fmtTime(row.startedAt)}</dd>
        <dt>{row.failedAt ? "Failed" : "Completed"}</dt><dd>{fmtTime(row.failedAt ?? row.completedAt)}</dd>
        <dt>Duration</dt><dd>{took !== undefined ? duration(took - started) : "—"}</dd>
        <dt>Progress</dt><dd>{Math.round(row.progress ?? 0)}%</dd>
        {row.reason && <><dt>Failed by</dt><dd data-reason={row.reason}>{reasonText(row)}</dd></>}
        {row.wait && <><dt>Waits</dt><dd class="job-wait">{waitText(row)}</dd></>}
        {row.var && <><dt>Var</dt><dd><code>{row.var}</code></dd></>}
        {row.if !== undefined && <><dt>If</dt><dd><code>{row.if}</code></dd></>}
        {row.retry?.limit !== undefined && <><dt>Retry</dt><dd>attempt {attemptNumber(row)} of {row.retry.limit + 1}</dd></>}
        {row.timeout && <><dt>Timeout</dt><dd>{row.timeout}</dd></>}
        {row.redelivered ? <><dt>Redelivered</dt><dd>{row.redelivered}×</dd></> : null}
        <dt>Id</dt><dd><code class="job-id">{row.id}</code></dd>
      </dl>
      {skippable(props.job, row, attempts, composite) && <SkipForm taskId={row.id} onChanged={props.onChanged} />}
      {parent && (
        <p class="job-parent">In <button type="button" class="job-linklike" onClick={() => props.onSelect(parent.id)}>{parent.name ?? "(unnamed)"}</button>
          {parent.each ? " (each)" : parent.parallel ? " (parallel)" : ""}</p>)}
      {subjobId && <p><a href={href(["jobs", subjobId])}>Open the sub-job ↗</a></p>}
      {row.each && (
        <p>{eachSummary(row.each.size, counts)}</p>
      )}
      {kids.length > 0 && (
        <Section title={`Children (${kids.length.toLocaleString("en-US")})`}>
          <ul class="job-kids job-kids-list">
            {shownKids.map((r) => (
              <li key={r.id}>
                <button type="button" class="job-linklike" onClick={() => props.onSelect(r.id)}>{r.name ?? "(unnamed)"}</button>
                <StateBadge state={r.state} />
              </li>))}
          </ul>
          {kids.length > shownKids.length && (
            <p class="job-muted">The first {shownKids.length} of {kids.length.toLocaleString("en-US")}, failed and running first; the timeline has them all.</p>)}
        </Section>
      )}
      {row.error && <Section title="Error"><pre class="job-pre job-error-text">{row.error}</pre></Section>}
      {row.result !== undefined && row.result !== "" && <Section title="Result"><pre class="job-pre">{row.result}</pre></Section>}
      {row.image && <Section title="Image"><code>{row.image}</code></Section>}
      {row.run && <Section title="Run"><pre class="job-pre">{row.run}</pre></Section>}
      {row.cmd && <Section title="Cmd"><pre class="job-pre">{JSON.stringify(row.cmd)}</pre></Section>}
      {row.entrypoint && <Section title="Entrypoint"><pre class="job-pre">{JSON.stringify(row.entrypoint)}</pre></Section>}
      {row.env && Object.keys(row.env).length > 0 && (
        <Section title="Env">
          <table class="job-kv"><tbody>
            {Object.entries(row.env).map(([k, v]) => (
              <tr key={k}><th scope="row">{k}</th><td class={v === "[REDACTED]" ? "job-redacted" : undefined}>{v}</td></tr>))}
          </tbody></table>
        </Section>
      )}
      {row.files && Object.keys(row.files).length > 0 && (
        <Section title="Files">
          {Object.entries(row.files).map(([k, v]) => (
            <details key={k} class="job-file"><summary><code>{k}</code></summary><pre class="job-pre">{v}</pre></details>))}
        </Section>
      )}
      {(row.pre?.length || row.post?.length) ? (
        <Section title="Pre and post">
          <ul class="job-kids">
            {(row.pre ?? []).map((p, i) => <li key={`pre${i}`}>pre: {p.name ?? "(unnamed)"} <code>{p.run ?? p.image ?? ""}</code></li>)}
            {(row.post ?? []).map((p, i) => <li key={`post${i}`}>post: {p.name ?? "(unnamed)"} <code>{p.run ?? p.image ?? ""}</code></li>)}
          </ul>
        </Section>
      ) : null}
      {!composite && (
        <div ref={logRef}>
          <Section title="Log">
            <LogView key={row.id} taskId={row.id} active={active} pollTick={props.pollTick} listen={props.listen} />
          </Section>
        </div>
      )}
    </aside>
  );
}

function Section(props: { title: string; children: preact.ComponentChildren }) {
  return <section class="job-section"><h3>{props.title}</h3>{props.children}</section>;
}

function CloseButton(props: { onClose: () => void }) {
  return <button type="button" class="job-close" onClick={props.onClose} aria-label="Close the task panel (Esc)" title="Close (Esc)">×</button>;
}

// What PUT /tasks/{id}/skip takes (the server decides): a runnable task not started yet of
// an active job, or the failed top-level task a finished job stopped at (its latest attempt).
function skippable(job: Job, row: TaskRow, attempts: TaskRow[], composite: boolean): boolean {
  if (composite || (attempts.length && attempts[attempts.length - 1].id !== row.id)) return false;
  const active = ["PENDING", "SCHEDULED", "RUNNING", "PAUSED"].includes(job.state);
  if (active) return row.state === "PENDING" || row.state === "SCHEDULED";
  return row.state === "FAILED" && !row.parentId && !job.parentId &&
    (job.state === "FAILED" || job.state === "CANCELLED");
}

// Marks the task SKIPPED with a result; its job carries on.
function SkipForm(props: { taskId: string; onChanged?: () => void }) {
  const [result, setResult] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const skip = async () => {
    setBusy(true); setError(null);
    try { await api.skip(props.taskId, result); props.onChanged?.(); }
    catch (e) { setError((e as Error).message); }
    finally { setBusy(false); }
  };
  return (
    <div class="job-skip">
      <input aria-label="Result to skip with" placeholder="result (optional)" value={result}
             onInput={(e) => setResult((e.target as HTMLInputElement).value)} />
      <button type="button" onClick={skip} disabled={busy}
              title="Mark it SKIPPED with this result; its job carries on">{busy ? "Skipping…" : "Skip"}</button>
      {error && <p class="job-error" role="alert">skip: {error}</p>}
    </div>);
}
