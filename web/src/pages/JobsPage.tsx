// The jobs list: metric cards, state chips, search, a live table with actions, paging.
// Its filter lives in the URL (`#/jobs?state=FAILED&q=tag:x&page=2`, jobsFilter.ts).
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, type JobSummary, type Metrics, type Page } from "../api";
import { subscribe } from "../events";
import { href, navigate } from "../router";
import { useKeys } from "../keys";
import { failureRate, formatTime, formatDuration, relativeTime, runtime } from "../format";
import { Badge, StateBadge } from "../components/StateBadge";
import { ProgressBar } from "../components/ProgressBar";
import { ErrorNotice } from "../components/Notice";
import { canCancel, canRestart, filterParams, parseFilter, STATE_CHIPS, toggleChip, type JobsFilter } from "./jobsFilter";

const PAGE_SIZE = 20;

function useNow(active: boolean) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [active]);
  return now;
}

function MetricCards({ metrics, error }: { metrics?: Metrics; error?: unknown }) {
  const depth = metrics?.queues?.size;
  const rate = failureRate(metrics?.jobs.failedLastHour, metrics?.jobs.endedLastHour);
  const v = (x: number | undefined) => (x === undefined ? "—" : String(x));
  const cards = [
    { label: "Running jobs", value: v(metrics?.jobs.running), href: href("jobs", { state: "RUNNING" }) },
    { label: "Running tasks", value: v(metrics?.tasks.running) },
    { label: "Nodes online", value: v(metrics?.nodes.online), href: "#/nodes" },
    { label: "Queue depth", value: v(depth), href: "#/queues", hint: "messages waiting in all queues" },
    { label: "Failure rate, last hour", value: rate.text,
      hint: metrics?.jobs.endedLastHour !== undefined
        ? `${metrics.jobs.failedLastHour} of ${metrics.jobs.endedLastHour} jobs that ended failed`
        : metrics ? "not reported by this server" : undefined, bad: (rate.ratio ?? 0) > 0 },
  ];
  return (
    <section class="ui-cards" aria-label="Metrics" title={error ? `Metrics could not be read: ${(error as Error).message}` : undefined}>
      {cards.map((c) => {
        const body = (<>
          <span class="ui-card-label">{c.label}</span>
          <span class={`ui-card-value${c.bad ? " ui-card-bad" : ""}`}>{c.value}</span>
          <span class="ui-card-hint">{c.hint ?? "\u00a0"}</span>
        </>);
        return c.href ? <a class="ui-card" href={c.href} key={c.label}>{body}</a>
          : <div class="ui-card" key={c.label}>{body}</div>;
      })}
    </section>
  );
}

export function JobsPage({ params }: { params: Record<string, string> }) {
  const filter = useMemo(() => parseFilter(params), [params.state, params.q, params.page]);
  const [page, setPage] = useState<Page<JobSummary>>();
  const [error, setError] = useState<unknown>();
  const [loading, setLoading] = useState(true);
  const [metrics, setMetrics] = useState<Metrics>();
  const [metricsError, setMetricsError] = useState<unknown>();
  const [search, setSearch] = useState(filter.q);
  const [selected, setSelected] = useState(0);
  const [flash, setFlash] = useState<{ text: string; bad?: boolean }>();
  const [busy, setBusy] = useState<string>();
  const searchRef = useRef<HTMLInputElement>(null);
  const tableRef = useRef<HTMLTableSectionElement>(null);
  const filterRef = useRef(filter);
  filterRef.current = filter;

  const go = (f: JobsFilter, replace = false) => navigate("jobs", filterParams(f), replace);

  const load = useCallback(async () => {
    const f = filterRef.current;
    try {
      const p = await api.jobs({ page: f.page, size: PAGE_SIZE, q: f.q.trim() || undefined,
                                 state: f.states.length ? f.states.join(",") : undefined });
      if (filterRef.current !== f) return;
      setPage(p);
      setError(undefined);
    } catch (e) { setError(e); }
    finally { setLoading(false); }
  }, []);
  const loadMetrics = useCallback(async () => {
    // One call: /metrics carries the messages waiting too (the server this UI is built into).
    try {
      setMetrics(await api.metrics());
      setMetricsError(undefined);
    } catch (e) { setMetricsError(e); }
  }, []);

  // A refresh at most once a second, however many events arrive.
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const last = useRef(0);
  const refreshSoon = useCallback(() => {
    if (timer.current) return;
    const wait = Math.max(0, 1000 - (Date.now() - last.current));
    timer.current = setTimeout(() => {
      timer.current = null;
      last.current = Date.now();
      void load(); void loadMetrics();
    }, wait);
  }, [load, loadMetrics]);

  useEffect(() => { setLoading(true); void load(); setSearch(filter.q); setSelected(0); }, [filter]);
  useEffect(() => {
    void loadMetrics();
    const sub = subscribe({
      onEvent: (e) => {
        if (e.type !== "job") return;
        setPage((p) => p && ({
          ...p, items: p.items.map((j) => j.id === e.jobId ? {
            ...j, state: e.state as JobSummary["state"], progress: e.progress ?? j.progress,
            position: e.position ?? j.position, taskCount: e.taskCount ?? j.taskCount } : j),
        }));
        refreshSoon();
      },
      onPoll: refreshSoon,
      pollMs: 3000,
    });
    return () => { sub.close(); if (timer.current) clearTimeout(timer.current); };
  }, []);

  // The search box writes the URL 300 ms after the last key.
  useEffect(() => {
    if (search === filter.q) return;
    const t = setTimeout(() => go({ ...filterRef.current, q: search, page: 1 }, true), 300);
    return () => clearTimeout(t);
  }, [search]);

  const items = page?.items ?? [];
  const now = useNow(items.some((j) => j.state === "RUNNING"));

  const open = (j?: JobSummary) => { if (j) navigate(["jobs", j.id]); };
  useKeys({
    search: () => { searchRef.current?.focus(); searchRef.current?.select(); },
    down: () => { setSelected((i) => Math.min(items.length - 1, i + 1)); },
    up: () => { setSelected((i) => Math.max(0, i - 1)); },
    open: () => { if (!items[selected]) return false; open(items[selected]); },
    escape: (e) => {
      if (e.target === searchRef.current) {
        if (search) setSearch(""); else searchRef.current?.blur();
        return;
      }
      return false;
    },
  });
  useEffect(() => {
    tableRef.current?.querySelector<HTMLElement>(`tr[data-index="${selected}"]`)?.scrollIntoView?.({ block: "nearest" });
  }, [selected]);

  const act = async (what: "cancel" | "restart", j: JobSummary) => {
    setBusy(j.id + what);
    try {
      await (what === "cancel" ? api.cancel(j.id) : api.restart(j.id));
      setFlash({ text: `${what === "cancel" ? "Cancelling" : "Restarting"} “${j.name ?? j.id}”.` });
      refreshSoon();
    } catch (e) {
      setFlash({ text: `Could not ${what} “${j.name ?? j.id}”: ${(e as Error).message}`, bad: true });
    } finally { setBusy(undefined); }
  };

  const total = page?.totalItems ?? 0;
  const pages = Math.max(1, page?.totalPages ?? 1);
  return (
    <section class="ui-jobs">
      <MetricCards metrics={metrics} error={metricsError} />
      <div class="ui-toolbar">
        <div class="ui-chips" role="group" aria-label="Filter by state">
          <button type="button" class="ui-chip" aria-pressed={filter.states.length === 0}
                  onClick={() => go(toggleChip(filter, null))}>All</button>
          {STATE_CHIPS.map((s) => (
            <button type="button" key={s} class={`ui-chip ui-chip-${s.toLowerCase()}`}
                    aria-pressed={filter.states.includes(s)} onClick={() => go(toggleChip(filter, s))}>
              {s[0] + s.slice(1).toLowerCase()}
            </button>
          ))}
        </div>
        <label class="ui-search">
          <span class="ui-visually-hidden">Search jobs</span>
          <input ref={searchRef} type="search" placeholder="Search name, description or tag:x   ( / )"
                 value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
        </label>
      </div>
      <div class="ui-flash" role="status" aria-live="polite">
        {flash && <span class={flash.bad ? "ui-flash-bad" : ""}>{flash.text}</span>}
      </div>
      <ErrorNotice error={error} />
      <div class="ui-table-wrap">
        <table class="ui-table ui-jobs-table" aria-busy={loading}>
          <thead>
            <tr>
              <th scope="col">Job</th><th scope="col">State</th><th scope="col" class="ui-col-tags">Tags</th>
              <th scope="col" class="ui-col-created">Created</th><th scope="col" class="ui-col-runtime">Runtime</th>
              <th scope="col" class="ui-col-progress">Progress</th><th scope="col"><span class="ui-visually-hidden">Actions</span></th>
            </tr>
          </thead>
          <tbody ref={tableRef}>
            {items.map((j, i) => {
              const rt = runtime(j, now);
              return (
                <tr key={j.id} data-index={i} data-job-id={j.id} data-state={j.state}
                    class={i === selected ? "ui-selected" : undefined} aria-current={i === selected ? "true" : undefined}
                    onClick={() => setSelected(i)}>
                  <td class="ui-col-name">
                    <a href={href(["jobs", j.id])} class="ui-job-name">{j.name || j.id}</a>
                    {j.parentId && <Badge href={href(["tasks", j.parentId])} title="Started by a subjob task of another job: open the parent">sub-job</Badge>}
                    {j.schedule && <Badge href={href(["scheduled", j.schedule.id])} title={`Fired by a scheduled job (${j.schedule.cron})`}>scheduled</Badge>}
                    <span class="ui-job-desc">{j.description ?? "\u00a0"}</span>
                  </td>
                  <td><StateBadge state={j.state} /></td>
                  <td class="ui-col-tags">
                    {(j.tags ?? []).map((t) => (
                      <a key={t} class="ui-tag" href={href("jobs", { q: `tag:${t}` })} title={`Jobs tagged ${t}`}>{t}</a>
                    ))}
                  </td>
                  <td class="ui-col-created" title={formatTime(j.createdAt)}>{relativeTime(j.createdAt, now)}</td>
                  <td class="ui-col-runtime ui-num">{rt === undefined ? "—" : formatDuration(rt)}</td>
                  <td class="ui-col-progress">
                    <ProgressBar value={j.state === "COMPLETED" ? 100 : j.progress} state={j.state} label={`progress of ${j.name ?? j.id}`} />
                    <span class="ui-num ui-steps" title="task position / tasks">{Math.min(j.position, j.taskCount)}/{j.taskCount}</span>
                  </td>
                  <td class="ui-actions">
                    {canCancel(j.state) && <button type="button" disabled={busy === j.id + "cancel"}
                      onClick={(e) => { e.stopPropagation(); void act("cancel", j); }}
                      aria-label={`Cancel ${j.name ?? j.id}`}>Cancel</button>}
                    {canRestart(j.state) && <button type="button" disabled={busy === j.id + "restart"}
                      onClick={(e) => { e.stopPropagation(); void act("restart", j); }}
                      aria-label={`Restart ${j.name ?? j.id}`}>Restart</button>}
                    <a class="button" href={href("editor", { from: j.id })} aria-label={`Duplicate ${j.name ?? j.id}`}
                       title="Open a copy in the editor">Duplicate</a>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
        {!loading && items.length === 0 && !error && (
          <p class="ui-empty">{filter.states.length || filter.q ? "No jobs match this filter." : "No jobs yet. "}
            {!(filter.states.length || filter.q) && <a href="#/editor">Submit one</a>}</p>
        )}
      </div>
      <nav class="ui-pager" aria-label="Pages">
        <button type="button" disabled={filter.page <= 1} onClick={() => go({ ...filter, page: filter.page - 1 })}>← Previous</button>
        <span>Page {Math.min(filter.page, pages)} of {pages} · {total} {total === 1 ? "job" : "jobs"}</span>
        <button type="button" disabled={filter.page >= pages} onClick={() => go({ ...filter, page: filter.page + 1 })}>Next →</button>
      </nav>
    </section>
  );
}
