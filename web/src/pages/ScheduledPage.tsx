// Scheduled jobs: the list (#/scheduled) and one scheduled job (#/scheduled/ID) with its
// definition, pause / resume / delete, and the jobs it fired that the jobs list shows.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, type JobSummary, type Page, type ScheduledJob } from "../api";
import { href, navigate } from "../router";
import { useKeys } from "../keys";
import { formatTime, relativeTime } from "../format";
import { StateBadge } from "../components/StateBadge";
import { ConfirmDialog } from "../components/Dialog";
import { ErrorNotice } from "../components/Notice";
import { jobToYaml } from "./yaml";

const PAGE_SIZE = 20;

function useTick(ms: number) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => { const t = setInterval(() => setNow(Date.now()), ms); return () => clearInterval(t); }, [ms]);
  return now;
}

function ScheduledList({ params }: { params: Record<string, string> }) {
  const pageNo = Math.max(1, Number(params.page ?? "1") || 1);
  const [page, setPage] = useState<Page<ScheduledJob>>();
  const [error, setError] = useState<unknown>();
  const [selected, setSelected] = useState(0);
  const now = useTick(5000);
  const load = useCallback(async () => {
    try { setPage(await api.scheduled({ page: pageNo, size: PAGE_SIZE })); setError(undefined); }
    catch (e) { setError(e); }
  }, [pageNo]);
  useEffect(() => { void load(); const t = setInterval(load, 5000); return () => clearInterval(t); }, [load]);
  const items = page?.items ?? [];
  useKeys({
    down: () => { setSelected((i) => Math.min(items.length - 1, i + 1)); },
    up: () => { setSelected((i) => Math.max(0, i - 1)); },
    open: () => { if (!items[selected]) return false; navigate(["scheduled", items[selected].id]); },
  });
  const pages = Math.max(1, page?.totalPages ?? 1);
  return (
    <section>
      <div class="ui-head">
        <h1>Scheduled jobs</h1>
        <div class="ui-head-actions"><a class="button primary" href={href("editor", { schedule: "1" })}>New scheduled job</a></div>
      </div>
      <ErrorNotice error={error} />
      <div class="ui-table-wrap">
        <table class="ui-table ui-sched-table">
          <thead><tr><th scope="col">Name</th><th scope="col">Cron</th><th scope="col" class="ui-hide-phone">Time zone</th>
            <th scope="col">State</th><th scope="col">Next run</th><th scope="col" class="ui-hide-phone">Last job</th></tr></thead>
          <tbody>
            {items.map((s, i) => (
              <tr key={s.id} data-id={s.id} class={i === selected ? "ui-selected" : undefined} aria-current={i === selected ? "true" : undefined}
                  onClick={() => setSelected(i)}>
                <td><a class="ui-job-name" href={href(["scheduled", s.id])}>{s.name || s.id}</a>
                  <span class="ui-job-desc">{s.description ?? "\u00a0"}</span></td>
                <td><code>{s.schedule?.cron ?? s.cron}</code></td>
                <td class="ui-hide-phone">{s.schedule?.timezone ?? "UTC"}</td>
                <td><StateBadge state={s.state} /></td>
                <td title={formatTime(s.nextRunAt)}>{s.state === "ACTIVE" ? relativeTime(s.nextRunAt, now) : "—"}</td>
                <td class="ui-hide-phone">{s.lastJobId ? <a href={href(["jobs", s.lastJobId])}>{s.lastJobId.slice(0, 12)}…</a> : <span class="ui-muted">none yet</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {page && items.length === 0 && <p class="ui-empty">No scheduled jobs. <a href={href("editor", { schedule: "1" })}>Create one</a></p>}
      </div>
      {pages > 1 && (
        <nav class="ui-pager" aria-label="Pages">
          <button type="button" disabled={pageNo <= 1} onClick={() => navigate("scheduled", { page: pageNo - 1 })}>← Previous</button>
          <span>Page {pageNo} of {pages} · {page?.totalItems} scheduled jobs</span>
          <button type="button" disabled={pageNo >= pages} onClick={() => navigate("scheduled", { page: pageNo + 1 })}>Next →</button>
        </nav>
      )}
    </section>
  );
}

function ScheduledDetail({ id }: { id: string }) {
  const [s, setS] = useState<ScheduledJob>();
  const [error, setError] = useState<unknown>();
  const [fired, setFired] = useState<JobSummary[]>();
  const [flash, setFlash] = useState<{ text: string; bad?: boolean }>();
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const now = useTick(5000);
  const alive = useRef(true);
  const load = useCallback(async () => {
    try {
      const v = await api.scheduledJob(id);
      if (!alive.current) return;
      setS(v); setError(undefined);
      // GET /jobs cannot filter by schedule: of the newest page of jobs, those this one fired.
      const jobs = await api.jobs({ page: 1, size: 100, q: v.name || undefined });
      if (alive.current) setFired(jobs.items.filter((j) => j.schedule?.id === id));
    } catch (e) { if (alive.current) setError(e); }
  }, [id]);
  useEffect(() => { alive.current = true; void load(); const t = setInterval(load, 5000);
                    return () => { alive.current = false; clearInterval(t); }; }, [load]);
  const act = async (what: "pause" | "resume" | "delete") => {
    setBusy(true);
    try {
      if (what === "pause") await api.pauseScheduled(id);
      else if (what === "resume") await api.resumeScheduled(id);
      else { await api.deleteScheduled(id); navigate("scheduled"); return; }
      setFlash({ text: what === "pause" ? "Paused: no job fires until it is resumed." : "Resumed: ticks count from now." });
      await load();
    } catch (e) {
      setFlash({ text: `Could not ${what}: ${(e as Error).message}`, bad: true });
    } finally { setBusy(false); setConfirm(false); }
  };
  if (error && !s) return <section><h1>Scheduled job</h1><ErrorNotice error={error} /><a href="#/scheduled">All scheduled jobs</a></section>;
  if (!s) return <section><h1>Scheduled job</h1><p class="ui-muted">Loading…</p></section>;
  return (
    <section>
      <div class="ui-head">
        <h1>{s.name || s.id}</h1>
        <StateBadge state={s.state} />
        <div class="ui-head-actions">
          {s.state === "ACTIVE" && <button type="button" disabled={busy} onClick={() => void act("pause")}>Pause</button>}
          {s.state === "PAUSED" && <button type="button" disabled={busy} onClick={() => void act("resume")}>Resume</button>}
          <a class="button" href={`#/scheduled/${encodeURIComponent(id)}/edit`}>Edit</a>
          <button type="button" class="ui-danger" disabled={busy} onClick={() => setConfirm(true)}>Delete</button>
        </div>
      </div>
      <div class="ui-flash" role="status" aria-live="polite">{flash && <span class={flash.bad ? "ui-flash-bad" : ""}>{flash.text}</span>}</div>
      <dl class="ui-dl">
        <dt>Cron</dt><dd><code>{s.schedule?.cron ?? s.cron}</code></dd>
        <dt>Time zone</dt><dd>{s.schedule?.timezone ?? "UTC"}</dd>
        <dt>Overlap</dt><dd>{s.schedule?.overlap ?? "allow"}</dd>
        <dt>Next run</dt><dd>{s.state === "ACTIVE" && s.nextRunAt ? `${formatTime(s.nextRunAt)} (${relativeTime(s.nextRunAt, now)})` : "— (paused)"}</dd>
        <dt>Last job</dt><dd>{s.lastJobId ? <a href={href(["jobs", s.lastJobId])}>{s.lastJobId}</a> : "none yet"}</dd>
        <dt>Created</dt><dd>{formatTime(s.createdAt)}</dd>
        <dt>Updated</dt><dd>{formatTime(s.updatedAt)}</dd>
        {s.description && <><dt>Description</dt><dd>{s.description}</dd></>}
      </dl>
      <h2>Jobs it fired</h2>
      <p class="ui-note">The jobs API cannot filter by schedule: these are the jobs named “{s.name}” among the newest 100 that
        carry this schedule’s id. The last job it fired is linked above.</p>
      <div class="ui-table-wrap">
        <table class="ui-table">
          <thead><tr><th scope="col">Job</th><th scope="col">State</th><th scope="col">Created</th></tr></thead>
          <tbody>
            {(fired ?? []).map((j) => (
              <tr key={j.id}><td><a href={href(["jobs", j.id])}>{j.id}</a></td><td><StateBadge state={j.state} /></td>
                <td title={formatTime(j.createdAt)}>{relativeTime(j.createdAt, now)}</td></tr>
            ))}
          </tbody>
        </table>
        {fired && fired.length === 0 && <p class="ui-empty">None found among the newest jobs.</p>}
      </div>
      <h2>Definition</h2>
      <pre class="ui-code" aria-label="Definition (YAML)">{jobToYaml(s, { keepSchedule: true })}</pre>
      {confirm && (
        <ConfirmDialog title="Delete this scheduled job?" confirmLabel="Delete" danger onClose={() => setConfirm(false)}
                       onConfirm={() => void act("delete")}>
          <p>“{s.name || s.id}” will fire no more jobs. The jobs it already fired stay.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}

export function ScheduledPage({ id, params }: { id?: string; params: Record<string, string> }) {
  return id ? <ScheduledDetail id={id} /> : <ScheduledList params={params} />;
}
