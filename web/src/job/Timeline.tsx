// The timeline: one row per task slot, a bar per attempt, virtualised (only the rows in
// sight are in the DOM), so a 10,000-item each scrolls smoothly.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Timeline as Model, Bar } from "./timeline";
import { barX, duration, ticks, visibleRange } from "./timeline";

const ROW = 24;
const AXIS = 26;

export function Timeline(props: { model: Model; now: number; active: boolean; selected?: string; minRows: number;
                                  onSelect: (taskId: string, attempt: number) => void }) {
  const { model } = props;
  const box = useRef<HTMLDivElement>(null);
  const [scroll, setScroll] = useState(0);
  const [size, setSize] = useState({ w: 800, h: 400 });
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setSize({ w: el.clientWidth, h: el.clientHeight });
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const labelW = size.w < 600 ? 120 : 220;
  const width = Math.max(100, size.w - labelW - 16);
  const t1 = props.active ? Math.max(model.t1, props.now) : model.t1;
  const scale = { t0: model.t0, t1, width };
  const axis = useMemo(() => ticks(scale, 90), [model.t0, t1, width]);
  const { first, last } = visibleRange(scroll, size.h - AXIS, ROW, model.rows.length);

  // Keep the selected row in sight when it changes (a click in the graph).
  const selRow = props.selected ? model.rows.findIndex((r) => r.bars.some((b) => b.row.id === props.selected)) : -1;
  useEffect(() => {
    const el = box.current;
    if (!el || selRow < 0) return;
    const top = selRow * ROW;
    if (top < el.scrollTop || top + ROW > el.scrollTop + el.clientHeight - AXIS) el.scrollTop = Math.max(0, top - 3 * ROW);
  }, [selRow]);

  const rows = [];
  for (let i = first; i < last; i++) {
    const r = model.rows[i];
    const sel = r.bars.some((b) => b.row.id === props.selected);
    rows.push(
      <div key={r.key} class={`job-tl-row${sel ? " job-selected" : ""}`} style={{ top: `${i * ROW}px`, height: `${ROW}px` }}>
        <button type="button" class="job-tl-label" style={{ width: `${labelW}px`, paddingLeft: `${6 + r.depth * 12}px` }}
                title={r.label} onClick={() => { const b = r.bars[r.bars.length - 1]; props.onSelect(b.row.id, b.attempt); }}>
          {r.label}
        </button>
        <div class="job-tl-bars" style={{ left: `${labelW}px`, width: `${width}px` }}>
          {r.bars.map((b) => <BarView key={b.row.id} b={b} now={props.now} scale={scale} selected={b.row.id === props.selected}
                                      onSelect={props.onSelect} />)}
        </div>
      </div>);
  }
  const nowX = props.active ? barX(scale, props.now, props.now).x : undefined;
  return (
    <div class="job-tl" ref={box} style={{ height: `clamp(200px, ${(Math.max(model.rows.length, props.minRows) + 1) * ROW + AXIS + 4}px, 62vh)` }}
         onScroll={(e) => setScroll((e.currentTarget as HTMLDivElement).scrollTop)}
         role="group" aria-label={`Timeline of ${model.rows.length} task slots`}>
      <div class="job-tl-axis" style={{ height: `${AXIS}px` }}>
        <span class="job-tl-axis-label" style={{ width: `${labelW}px` }}>
          {model.rows.length.toLocaleString("en-US")} row{model.rows.length === 1 ? "" : "s"}
        </span>
        <div class="job-tl-ticks" style={{ left: `${labelW}px`, width: `${width}px` }}>
          {axis.ticks.map((t) => <span key={t.t} class="job-tl-tick" style={{ left: `${t.x}px` }}>{t.label}</span>)}
          {nowX !== undefined && <span class="job-tl-now-label" style={{ left: `${nowX}px` }}>now</span>}
        </div>
      </div>
      <div class="job-tl-body" style={{ height: `${model.rows.length * ROW}px` }}>
        <div class="job-tl-grid" style={{ left: `${labelW}px`, width: `${width}px` }}>
          {axis.ticks.map((t) => <span key={t.t} style={{ left: `${t.x}px` }} />)}
        </div>
        {rows}
        {nowX !== undefined && <div class="job-tl-now" style={{ left: `${labelW + nowX}px` }} aria-hidden="true" />}
      </div>
    </div>
  );
}

function BarView(props: { b: Bar; now: number; scale: { t0: number; t1: number; width: number }; selected: boolean;
                          onSelect: (taskId: string, attempt: number) => void }) {
  const { b, scale } = props;
  const end = b.active ? Math.max(b.end, props.now) : b.end;
  const { x, w } = barX(scale, b.start, end);
  const q = b.queued !== undefined ? barX(scale, b.queued, b.start) : undefined;
  const title = `${b.row.name ?? ""} · attempt ${b.attempt} · ${b.row.state.toLowerCase()} · ${duration(end - b.start)}` +
    (b.queued !== undefined ? ` (waited ${duration(b.start - b.queued)})` : "");
  return (
    <>
      {q && q.w > 2 && <span class="job-tl-wait" style={{ left: `${q.x}px`, width: `${b.start > b.queued! ? (x - q.x) : 0}px` }} />}
      <button type="button" class={`job-tl-bar job-s-${b.row.state}${b.retry ? " job-tl-retry" : ""}${props.selected ? " job-selected" : ""}${b.active ? " job-tl-active" : ""}`}
              style={{ left: `${x}px`, width: `${w}px` }} title={title} aria-label={title}
              data-attempt={b.attempt}
              onClick={() => props.onSelect(b.row.id, b.attempt)}>
        {b.retry && w > 22 ? <span class="job-tl-mark">↻{b.attempt}</span> : null}
      </button>
      {b.retry && w <= 22 ? <span class={`job-tl-mark job-tl-mark-out job-s-${b.row.state}`} style={{ left: `${x + w + 1}px` }} aria-hidden="true">↻{b.attempt}</span> : null}
    </>
  );
}
