// A task's live log: the newest page first, older pages on demand, `log` events appended
// while it runs (or the newest page re-read on each poll when the stream is down),
// following the end unless the user scrolled up; search with next/previous; ANSI colours
// as styled spans (text nodes only, never HTML).
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api } from "../api";
import type { Style } from "./ansi";
import { findMatches, highlight, LogParts, pageBefore, partsFromPage } from "./log";

const PAGE = 100; // the API's largest page

export type LogListener = (e: { taskId: string; number: number; contents: string }) => void;

function styleOf(s: Style): { cls: string; css: Record<string, string> } {
  const cls: string[] = [];
  const css: Record<string, string> = {};
  if (s.fg) { if (s.fg.startsWith("c")) cls.push(`job-fg-${s.fg}`); else css.color = s.fg; }
  if (s.bg) { if (s.bg.startsWith("c")) cls.push(`job-bg-${s.bg}`); else css.backgroundColor = s.bg; }
  if (s.bold) cls.push("job-b");
  if (s.dim) cls.push("job-dim");
  if (s.italic) cls.push("job-i");
  if (s.underline) cls.push("job-u");
  return { cls: cls.join(" "), css };
}

export function LogView(props: { taskId: string; active: boolean; pollTick: number;
                                  listen: (f: LogListener) => () => void }) {
  const { taskId, active } = props;
  const parts = useRef(new LogParts());
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [query, setQuery] = useState("");
  const [current, setCurrent] = useState(0);
  const [follow, setFollow] = useState(true);
  const box = useRef<HTMLPreElement>(null);

  const bump = () => setVersion((v) => v + 1);
  const loadNewest = async () => {
    try {
      const page = await api.taskLog(taskId, 1, PAGE);
      if (parts.current.add(partsFromPage(page.items))) bump();
      setError(null);
    } catch (e) { setError(String((e as Error).message ?? e)); }
    finally { setLoading(false); }
  };

  // A new task: start over.
  useEffect(() => {
    parts.current = new LogParts();
    setLoading(true); setFollow(true); setQuery(""); setCurrent(0); bump();
    void loadNewest();
    return props.listen((e) => { if (e.taskId === taskId && parts.current.add([e])) bump(); });
  }, [taskId]);
  // While it runs and the stream is down: re-read the newest page on each poll; once it
  // ends, once more for the last parts.
  useEffect(() => { if (props.pollTick && active) void loadNewest(); }, [props.pollTick]);
  const wasActive = useRef(active);
  useEffect(() => {
    if (wasActive.current && !active) void loadNewest();
    wasActive.current = active;
  }, [active]);

  const loadOlder = async () => {
    const p = parts.current;
    const oldest = p.oldest(), newest = p.newest();
    if (oldest === undefined || newest === undefined) return;
    setLoadingOlder(true);
    const el = box.current;
    const fromBottom = el ? el.scrollHeight - el.scrollTop : 0;
    try {
      const page = await api.taskLog(taskId, pageBefore(oldest, newest, PAGE), PAGE);
      if (p.add(partsFromPage(page.items))) {
        bump();
        // Keep the lines in sight where they were.
        requestAnimationFrame(() => { if (el) el.scrollTop = el.scrollHeight - fromBottom; });
      }
    } catch (e) { setError(String((e as Error).message ?? e)); }
    finally { setLoadingOlder(false); }
  };

  const lines = useMemo(() => parts.current.lines(), [version]);
  const matches = useMemo(() => findMatches(lines, query), [lines, query]);
  const cur = matches.length ? Math.min(current, matches.length - 1) : -1;

  // Follow the end unless the user scrolled up.
  useEffect(() => {
    const el = box.current;
    if (el && follow && !query) el.scrollTop = el.scrollHeight;
  }, [lines, follow]);
  const onScroll = () => {
    const el = box.current;
    if (!el) return;
    setFollow(el.scrollHeight - el.scrollTop - el.clientHeight < 8);
  };
  // Bring the current match into view.
  useEffect(() => {
    if (cur < 0) return;
    box.current?.querySelector(`[data-match="${cur}"]`)?.scrollIntoView({ block: "nearest" });
  }, [cur, query, matches.length]);

  const step = (d: number) => { if (matches.length) setCurrent((c) => (Math.min(c, matches.length - 1) + d + matches.length) % matches.length); };

  // Index of the first match of each line, for highlight().
  let mi = 0;
  return (
    <section class="job-log" aria-label="Log">
      <div class="job-log-tools">
        <input type="search" class="job-log-search" placeholder="Search the log" aria-label="Search the log" value={query}
               onInput={(e) => { setQuery((e.currentTarget as HTMLInputElement).value); setCurrent(0); }}
               onKeyDown={(e) => {
                 if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); }
                 if (e.key === "Escape" && query) { e.stopPropagation(); setQuery(""); }
               }} />
        <span class="job-log-count" aria-live="polite">{query ? (matches.length ? `${cur + 1} / ${matches.length}` : "no match") : ""}</span>
        <button type="button" onClick={() => step(-1)} disabled={!matches.length} aria-label="Previous match">↑</button>
        <button type="button" onClick={() => step(1)} disabled={!matches.length} aria-label="Next match">↓</button>
        {!follow && <button type="button" onClick={() => { setFollow(true); }}>Follow ⤓</button>}
      </div>
      {parts.current.hasOlder() && (
        <button type="button" class="job-log-older" onClick={loadOlder} disabled={loadingOlder}>
          {loadingOlder ? "Loading…" : `Load older (${(parts.current.oldest()! - 1).toLocaleString("en-US")} parts)`}
        </button>
      )}
      <pre class="job-log-text" ref={box} onScroll={onScroll} tabIndex={0} aria-label="Log lines">
        {loading && !lines.length ? <span class="job-muted">Loading…</span> : null}
        {!loading && parts.current.size === 0 ? <span class="job-muted">{active ? "Waiting for output…" : "No output."}</span> : null}
        {parts.current.size > 0 && lines.map((l, i) => {
          while (mi < matches.length && matches[mi].line < i) mi++;
          const pieces = highlight(l, i, matches, mi);
          return (
            <div class="job-log-line" key={i}>
              {pieces.map((p, k) => {
                const { cls, css } = styleOf(p.style);
                const span = <span key={k} class={cls || undefined} style={css}>{p.text}</span>;
                return p.match !== undefined
                  ? <mark key={k} class={p.match === cur ? "job-mark job-mark-current" : "job-mark"} data-match={p.match}>{span}</mark>
                  : span;
              })}
            </div>);
        })}
      </pre>
      {error && <p class="job-error" role="alert">Log: {error}</p>}
    </section>
  );
}
