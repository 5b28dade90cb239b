// The job's graph: an SVG of the laid-out model. Scrolls natively (wheel, touch); drag the
// background to pan; Ctrl/⌘ + wheel or the buttons to zoom. Nodes are buttons: click,
// Enter or Space selects the task.
import { useEffect, useRef, useState } from "preact/hooks";
import type { GraphModel, GraphNode } from "./graph";
import { href } from "../router";

const STATES: [string, string][] = [
  ["COMPLETED", "completed"], ["RUNNING", "running"], ["FAILED", "failed"], ["SCHEDULED", "scheduled"],
  ["PENDING", "pending"], ["CANCELLED", "cancelled"], ["SKIPPED", "skipped"], ["NOT_REACHED", "not reached"]];

function clip(s: string, n: number) { return s.length > n ? `${s.slice(0, n - 1)}…` : s; }

function path(points: { x: number; y: number }[]) {
  return points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
}

export function Graph(props: { model: GraphModel; selected?: string; onSelect: (n: GraphNode) => void }) {
  const { model } = props;
  const box = useRef<HTMLDivElement>(null);
  const [zoom, setZoom] = useState(1);
  const drag = useRef<{ x: number; y: number; left: number; top: number; moved: boolean } | null>(null);

  // Fit once to the width on first show when the graph is wider than the box (never
  // below 0.5: smaller is unreadable; the box scrolls instead).
  const fitted = useRef(false);
  useEffect(() => {
    if (fitted.current || !box.current || !model.width) return;
    fitted.current = true;
    const w = box.current.clientWidth;
    if (model.width > w) setZoom(Math.max(0.5, Math.floor((w / model.width) * 20) / 20));
  }, [model.width]);

  const fit = () => {
    const el = box.current;
    if (!el || !model.width) return;
    setZoom(Math.max(0.25, Math.min(1.5, el.clientWidth / model.width, el.clientHeight / model.height)));
  };
  const onWheel = (e: WheelEvent) => {
    if (!(e.ctrlKey || e.metaKey)) return;
    e.preventDefault();
    setZoom((z) => Math.max(0.25, Math.min(2, z * (e.deltaY < 0 ? 1.1 : 1 / 1.1))));
  };
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    el.addEventListener("wheel", onWheel, { passive: false });
    return () => el.removeEventListener("wheel", onWheel);
  }, []);
  const onPointerDown = (e: PointerEvent) => {
    if (e.button !== 0 || (e.target as Element).closest(".job-node, a") || e.pointerType === "touch") return;
    const el = box.current!;
    drag.current = { x: e.clientX, y: e.clientY, left: el.scrollLeft, top: el.scrollTop, moved: false };
    el.setPointerCapture(e.pointerId);
  };
  const onPointerMove = (e: PointerEvent) => {
    const d = drag.current;
    if (!d) return;
    const el = box.current!;
    el.scrollLeft = d.left - (e.clientX - d.x);
    el.scrollTop = d.top - (e.clientY - d.y);
  };
  const onPointerUp = () => { drag.current = null; };

  const w = model.width * zoom, h = model.height * zoom;
  return (
    <div class="job-graph">
      <div class="job-graph-tools" role="toolbar" aria-label="Zoom">
        <button type="button" onClick={() => setZoom((z) => Math.min(2, z * 1.25))} aria-label="Zoom in">+</button>
        <button type="button" onClick={() => setZoom((z) => Math.max(0.25, z / 1.25))} aria-label="Zoom out">−</button>
        <button type="button" onClick={fit}>Fit</button>
        <button type="button" onClick={() => setZoom(1)} aria-label="Actual size">1:1</button>
        <span class="job-muted">{Math.round(zoom * 100)}%</span>
      </div>
      <div class="job-graph-box" ref={box} style={{ height: `clamp(320px, ${Math.ceil(h) + 24}px, 62vh)` }} onPointerDown={onPointerDown} onPointerMove={onPointerMove}
           onPointerUp={onPointerUp} onPointerCancel={onPointerUp}>
        <svg width={Math.max(w, 1)} height={Math.max(h, 1)} viewBox={`0 0 ${model.width} ${model.height}`}
             role="group" aria-label="Task graph">
          <defs>
            <marker id="job-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
              <path d="M0,0 L10,5 L0,10 z" class="job-arrow" />
            </marker>
          </defs>
          {model.edges.map((e) => (
            <path key={`${e.from}>${e.to}`} d={path(e.points)} class="job-edge" marker-end="url(#job-arrow)"
                  data-edge={`${e.from}>${e.to}`} />
          ))}
          {model.edges.filter((e) => e.label && e.labelAt).map((e) => (
            <text key={`${e.from}>${e.to}/label`} x={e.labelAt!.x} y={e.labelAt!.y + 4} text-anchor="middle"
                  class="job-edge-label" data-edge={`${e.from}>${e.to}`}>{e.label}</text>
          ))}
          {model.nodes.map((n) => <NodeView key={n.id} n={n} selected={props.selected === n.id} onSelect={props.onSelect} />)}
        </svg>
      </div>
      <ul class="job-legend" aria-label="Legend">
        {STATES.map(([s, label]) => <li key={s}><span class={`job-swatch job-s-${s}`} />{label}</li>)}
      </ul>
    </div>
  );
}

function NodeView(props: { n: GraphNode; selected: boolean; onSelect: (n: GraphNode) => void }) {
  const { n } = props;
  if (n.kind === "join") {
    return <circle cx={n.x} cy={n.y} r={n.width / 2} class={`job-join job-s-${n.state}`} />;
  }
  const x = n.x - n.width / 2, y = n.y - n.height / 2;
  const chars = Math.floor((n.width - 24) / 7.2);
  const labelChars = n.subjobId ? chars - 7 : chars; // "open ↗" shares the first line
  const select = () => props.onSelect(n);
  const progress = n.kind === "each" && n.size ? ((n.counts?.COMPLETED ?? 0) + (n.counts?.FAILED ?? 0) +
    (n.counts?.SKIPPED ?? 0) + (n.counts?.CANCELLED ?? 0)) / n.size : undefined;
  const aux = [n.pre.length ? `pre ${n.pre.length}` : "", n.post.length ? `post ${n.post.length}` : ""].filter(Boolean).join(" · ");
  return (
    <g class={`job-node job-k-${n.kind} job-s-${n.state}${props.selected ? " job-selected" : ""}`}
       tabindex={0} role="button" data-node={n.id} data-state={n.state}
       aria-pressed={props.selected}
       aria-label={`${n.label}: ${n.state === "NOT_REACHED" ? "not reached" : n.state.toLowerCase()}, ${n.detail}`}
       onClick={select}
       onKeyDown={(e) => {
         if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(); return; }
         // Arrows move the focus to the previous or next task in the job's order.
         const step = e.key === "ArrowDown" || e.key === "ArrowRight" ? 1 : e.key === "ArrowUp" || e.key === "ArrowLeft" ? -1 : 0;
         if (!step) return;
         e.preventDefault();
         const all = [...(e.currentTarget as SVGGElement).ownerSVGElement!.querySelectorAll<SVGGElement>(".job-node")];
         all[all.indexOf(e.currentTarget as SVGGElement) + step]?.focus();
       }}>
      <title>{`${n.label}\n${n.detail}${aux ? `\n${aux}` : ""}`}</title>
      <rect x={x} y={y} width={n.width} height={n.height} rx={8} class="job-node-box" />
      <rect x={x} y={y} width={5} height={n.height} rx={2} class="job-node-stripe" />
      <text x={x + 14} y={y + 19} class="job-node-label">{clip(n.label, labelChars)}</text>
      {n.kind === "each" ? (() => {
        // Two lines: "each · 10,000" and the counts.
        const i = n.detail.indexOf(": ");
        return <>
          <text x={x + 14} y={y + 35} class="job-node-detail">{i < 0 ? n.detail : n.detail.slice(0, i)}</text>
          {i >= 0 && <text x={x + 14} y={y + 50} class="job-node-detail job-node-counts">{clip(n.detail.slice(i + 2), chars + 1)}</text>}
        </>;
      })() : <text x={x + 14} y={y + 36} class="job-node-detail">{clip(n.detail, chars + 1)}</text>}
      {aux && <text x={x + n.width - 8} y={y + 13} class="job-node-aux" text-anchor="end">{aux}</text>}
      {progress !== undefined && (
        <g>
          <rect x={x + 14} y={y + n.height - 9} width={n.width - 28} height={4} rx={2} class="job-node-track" />
          <rect x={x + 14} y={y + n.height - 9} width={(n.width - 28) * Math.min(1, progress)} height={4} rx={2} class="job-node-fill" />
        </g>
      )}
      {n.subjobId && (
        <a href={href(["jobs", n.subjobId])} class="job-node-link" aria-label={`Open sub-job ${n.label}`}
           onClick={(e) => e.stopPropagation()}>
          <text x={x + n.width - 8} y={y + 15} text-anchor="end">open ↗</text>
        </a>
      )}
    </g>
  );
}
