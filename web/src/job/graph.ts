// The job page's graph model: from a job (its definition, `tasks`, and its `execution`
// rows) one node per task slot of the definition, coloured by the state of the row that
// ran in that slot, then laid out top to bottom with dagre. Pure: no DOM.
//
// How rows map to slots (as the server answers, see testdata/): a top-level row has no
// `parentId` and the 1-based `position` of its task; a child of a parallel or an each has
// `parentId` = the composite row's id and no index, so parallel children are matched to
// their definition by name (then by order), and each children are shown in name order. A
// retry is a new row in the same slot with `retry.attempts` one higher. A switch's and a
// loop's children are shown in the order they were made (each is one step), after it. A
// task's fallback (a row with `handles: "onFailure"`, made in the failed task's place) is
// a node after the task's, its tasks after it; a job's cleanup rows (`job.onFailure`,
// `job.finally`, at position taskCount + 1) come after the job's tasks.
import dagre from "@dagrejs/dagre";
import type { Plan, TaskDef, TaskRow, TaskState } from "../api";

export type SlotState = TaskState | "NOT_REACHED";

// An `each` shows its children as nodes when it has at most this many.
export const EACH_EXPAND_LIMIT = 20;

export interface GraphNode {
  id: string;                 // stable within a definition: "1", "2/p0", "1/e3"
  kind: "task" | "parallel" | "each" | "subjob" | "switch" | "loop" | "cleanup" | "join";
  label: string;
  detail: string;             // the second line: "parallel · 6", counts, "sub-job"...
  state: SlotState;
  attempts: TaskRow[];        // oldest first; empty when not reached
  def?: TaskDef;
  counts?: Partial<Record<TaskState, number>>; // each: children by the state of their last attempt
  size?: number;              // each: items
  subjobId?: string;
  pre: string[];
  post: string[];
  width: number;
  height: number;
  x: number;                  // centre, after layout
  y: number;
}

// `label`: a graph's edge says its trigger rule (when not all_success) and its `when`.
export interface GraphEdge {
  from: string; to: string; label?: string;
  points: { x: number; y: number }[];
  labelAt?: { x: number; y: number };  // where dagre put the label
}
type Edge = { from: string; to: string; label?: string };

export interface GraphModel {
  nodes: GraphNode[];
  edges: GraphEdge[];
  width: number;
  height: number;
}

export interface JobLike { tasks?: TaskDef[]; execution?: TaskRow[]; mode?: string }

// A row that runs a fallback or a job's cleanup (the server's `handles`).
export function isHandler(r: TaskRow): boolean { return r.handles !== undefined; }

// Gives each fallback row to the group of rows whose task it stands in for: the group of
// its name whose last row FAILED before it was made (and has no fallback yet).
export function withFallbacks(groups: TaskRow[][], fallbacks: TaskRow[]): TaskRow[][] {
  for (const f of [...fallbacks].sort((a, b) => cmp(a.createdAt, b.createdAt) || cmp(a.id, b.id))) {
    const g = groups.find((x) => {
      const l = last(x)!;
      return !isHandler(l) && l.name === f.name && l.state === "FAILED" && cmp(l.createdAt, f.createdAt) <= 0;
    });
    if (g) g.push(f); else groups.push([f]);
  }
  return groups;
}

// The rows of one parent as slots: attempts grouped, each fallback in its task's slot.
function slotsOf(rows: TaskRow[]): TaskRow[][] {
  return withFallbacks(groupAttempts(rows.filter((r) => !isHandler(r))), rows.filter(isHandler));
}

// Whether a job's top-level tasks form a graph (`mode: dag`, or a task with `needs` or a
// `triggerRule`): their edges are then the plan's, not the order of the list. (A
// parallel's tasks with needs are a graph too: their edges are read from them.)
export function isGraphJob(job: JobLike): boolean {
  return job.mode === "dag" || (job.tasks ?? []).some((t) => t.needs !== undefined || t.triggerRule !== undefined);
}

// A task's needs as written: a name, or {task, when}.
function needsOf(d: TaskDef): { task: string; when?: string }[] {
  const needs = (d.needs ?? []) as (string | { task: string; when?: string })[];
  return needs.map((n) => (typeof n === "string" ? { task: n } : n));
}

export function attemptNumber(row: TaskRow): number {
  return (row.retry?.attempts ?? 0) + 1;
}

// Groups rows of one parent into slots: rows with the same name are attempts of one slot
// when each is a retry (`retry.attempts` = n) of the previous (n - 1). Rows with the same
// name and no retry link (an each whose children share a name) are separate slots.
export function groupAttempts(rows: TaskRow[]): TaskRow[][] {
  // Without retries every row is its own slot (the common case, and 10,000 each children).
  if (!rows.some((r) => (r.retry?.attempts ?? 0) > 0)) return rows.map((r) => [r]);
  const sorted = [...rows].sort((a, b) =>
    (a.retry?.attempts ?? 0) - (b.retry?.attempts ?? 0) || cmp(a.createdAt, b.createdAt) || cmp(a.id, b.id));
  const groups: TaskRow[][] = [];
  const open = new Map<string, TaskRow[][]>(); // name → groups, for retries to join
  for (const r of sorted) {
    const key = r.name ?? "";
    const n = r.retry?.attempts ?? 0;
    let target: TaskRow[] | undefined;
    if (n > 0) {
      target = open.get(key)?.find((g) => (g[g.length - 1].retry?.attempts ?? 0) === n - 1 &&
                                          !g.some((x) => (x.retry?.attempts ?? 0) === n));
    }
    if (target) target.push(r);
    else {
      const g = [r];
      groups.push(g);
      const list = open.get(key);
      if (list) list.push(g); else open.set(key, [g]);
    }
  }
  return groups;
}

function cmp(a?: string, b?: string) { return (a ?? "") < (b ?? "") ? -1 : (a ?? "") > (b ?? "") ? 1 : 0; }

const collator = new Intl.Collator(undefined, { numeric: true });
function byName(a: TaskRow[], b: TaskRow[]) {
  return collator.compare(a[0].name ?? "", b[0].name ?? "") || cmp(a[0].createdAt, b[0].createdAt);
}

function last<T>(a: T[]): T | undefined { return a[a.length - 1]; }

function fmt(n: number) { return n.toLocaleString("en-US"); }

// "each · 10,000: 9,990 ✓ 10 ✗ 1 ▶ 5 queued"
export function eachSummary(size: number | undefined, counts: Partial<Record<TaskState, number>>): string {
  const parts: string[] = [];
  const done = counts.COMPLETED ?? 0;
  const failed = (counts.FAILED ?? 0);
  const running = (counts.RUNNING ?? 0);
  const waiting = (counts.PENDING ?? 0) + (counts.SCHEDULED ?? 0) + (counts.CREATED ?? 0);
  const cancelled = (counts.CANCELLED ?? 0) + (counts.STOPPED ?? 0);
  const skipped = counts.SKIPPED ?? 0;
  if (done) parts.push(`${fmt(done)} ✓`);
  if (failed) parts.push(`${fmt(failed)} ✗`);
  if (running) parts.push(`${fmt(running)} ▶`);
  if (waiting) parts.push(`${fmt(waiting)} queued`);
  if (cancelled) parts.push(`${fmt(cancelled)} ■`);
  if (skipped) parts.push(`${fmt(skipped)} ⤼`);
  const head = `each · ${size === undefined ? "?" : fmt(size)}`;
  return parts.length ? `${head}: ${parts.join(" ")}` : head;
}

const SIZES = {
  task: { width: 184, height: 48 },
  parallel: { width: 184, height: 48 },
  each: { width: 240, height: 66 },
  subjob: { width: 184, height: 48 },
  switch: { width: 184, height: 48 },
  loop: { width: 184, height: 48 },
  join: { width: 12, height: 12 },
};

interface Builder {
  nodes: GraphNode[];
  edges: Edge[];
  children: Map<string, TaskRow[]>;   // parentId → rows
}

// Adds the nodes of one slot (a definition `def` and the rows that ran in it); returns
// its entry and exit node ids.
function addSlot(b: Builder, id: string, def: TaskDef | undefined, slot: TaskRow[]):
    { entry: string; exit: string } {
  const fallback = slot.filter(isHandler);
  const attempts = slot.filter((r) => !isHandler(r));
  if (fallback.length && !attempts.length) return addSteps(b, id, fallback, "fallback");
  const own = addTask(b, id, def, attempts);
  if (!fallback.length) return own;
  // The fallback, after the task it stands in for.
  const after = addSteps(b, `${id}/f`, fallback, "fallback");
  b.edges.push({ from: own.exit, to: after.entry, label: "on failure" });
  return { entry: own.entry, exit: after.exit };
}

// A handler row (a fallback, a job's onFailure or finally) and its tasks, one after another.
function addSteps(b: Builder, id: string, rows: TaskRow[], what: "fallback" | "cleanup"):
    { entry: string; exit: string } {
  const row = last(rows)!;
  const then = (row.onFailure as { then?: string } | undefined)?.then;
  const detail = what === "fallback" ? `onFailure · ${then ?? "fail"}`
    : row.handles === "job.onFailure" ? "if the job fails" : "however the job ends";
  b.nodes.push({ id, kind: "cleanup", label: row.name ?? "", detail, state: row.state,
                 attempts: rows, def: row, pre: [], post: [], x: 0, y: 0, ...SIZES.switch });
  const steps = slotsOf(rows.flatMap((r) => b.children.get(r.id) ?? []))
    .sort((x, y) => cmp(x[0].createdAt, y[0].createdAt) || cmp(x[0].id, y[0].id));
  let prev = id;
  if (steps.length > EACH_EXPAND_LIMIT) return { entry: id, exit: id };
  steps.forEach((g, i) => {
    const sub = addSlot(b, `${id}/s${i}`, undefined, g);
    b.edges.push({ from: prev, to: sub.entry });
    prev = sub.exit;
  });
  return { entry: id, exit: prev };
}

// The nodes of one task's own slot (a definition and its attempts).
function addTask(b: Builder, id: string, def: TaskDef | undefined, attempts: TaskRow[]):
    { entry: string; exit: string } {
  const row = last(attempts);
  const d: TaskDef = def ?? row ?? {};
  const state: SlotState = row ? row.state : "NOT_REACHED";
  const base = {
    id, attempts, def: d, state,
    label: row?.name ?? d.name ?? "(unnamed)",
    pre: (d.pre ?? []).map((p) => p.name ?? "pre"),
    post: (d.post ?? []).map((p) => p.name ?? "post"),
    x: 0, y: 0,
  };
  // Children of every attempt of a composite (a restarted parallel keeps its old ones).
  const childRows = () => attempts.flatMap((a) => b.children.get(a.id) ?? []);

  if (d.parallel) {
    const defs = d.parallel.tasks ?? [];
    b.nodes.push({ ...base, kind: "parallel", detail: `parallel · ${defs.length}`, ...SIZES.parallel });
    const join = `${id}/join`;
    b.nodes.push({ id: join, kind: "join", label: "", detail: "", state, attempts: [], pre: [], post: [],
                   x: 0, y: 0, ...SIZES.join });
    const groups = slotsOf(childRows());
    const matched = matchByName(defs, groups);
    const subs = defs.map((cd, i) => addSlot(b, `${id}/p${i}`, cd, matched[i] ?? []));
    if (!isGraphJob({ tasks: defs })) {
      subs.forEach((sub) => b.edges.push({ from: id, to: sub.entry }, { from: sub.exit, to: join }));
    } else {
      // Its tasks by their needs (a task that needs nothing starts at once); those that
      // nothing needs lead to the join.
      const index = new Map<string, number>();
      defs.forEach((cd, i) => { if (cd.name !== undefined && !index.has(cd.name)) index.set(cd.name, i); });
      const needed = new Set<number>();
      defs.forEach((cd, i) => {
        const needs = needsOf(cd).filter((n) => index.has(n.task));
        if (!needs.length) b.edges.push({ from: id, to: subs[i].entry });
        for (const n of needs) {
          const j = index.get(n.task)!;
          needed.add(j);
          const parts = [cd.triggerRule && cd.triggerRule !== "all_success" ? String(cd.triggerRule) : "",
                         n.when ? `when ${n.when}` : ""];
          const label = parts.filter(Boolean).join(", ");
          b.edges.push({ from: subs[j].exit, to: subs[i].entry, ...(label ? { label } : {}) });
        }
      });
      subs.forEach((sub, i) => { if (!needed.has(i)) b.edges.push({ from: sub.exit, to: join }); });
    }
    if (!defs.length) b.edges.push({ from: id, to: join });
    return { entry: id, exit: join };
  }

  if (d.each) {
    const groups = slotsOf(childRows());
    const counts: Partial<Record<TaskState, number>> = {};
    for (const g of groups) { const s = last(g)!.state; counts[s] = (counts[s] ?? 0) + 1; }
    const size = row?.each?.size ?? (row ? groups.length : undefined);
    b.nodes.push({ ...base, kind: "each", detail: eachSummary(size, counts), counts, size, ...SIZES.each });
    if (groups.length === 0 || groups.length > EACH_EXPAND_LIMIT || (size ?? 0) > EACH_EXPAND_LIMIT) {
      return { entry: id, exit: id };
    }
    groups.sort(byName);
    const join = `${id}/join`;
    b.nodes.push({ id: join, kind: "join", label: "", detail: "", state, attempts: [], pre: [], post: [],
                   x: 0, y: 0, ...SIZES.join });
    groups.forEach((g, i) => {
      const sub = addSlot(b, `${id}/e${i}`, d.each!.task, g);
      b.edges.push({ from: id, to: sub.entry }, { from: sub.exit, to: join });
    });
    return { entry: id, exit: join };
  }

  if (d.switch || d.loop) {
    // Its steps, one after another: the rows it made, oldest first (a retry joins its
    // step's slot). A switch's branches not taken are SKIPPED rows beside them.
    const all = childRows();
    const notTaken = all.filter(isNotTaken);
    const groups = slotsOf(all.filter((r) => !isNotTaken(r)))
      .sort((x, y) => cmp(x[0].createdAt, y[0].createdAt) || cmp(x[0].id, y[0].id));
    let detail: string;
    if (d.switch) {
      detail = row ? `switch · ${row.result === undefined || row.result === "" ? "—" : row.result}` : `switch on ${d.switch.value}`;
    } else {
      const per = Math.max(1, d.loop!.tasks?.length ?? 1);
      const began = Math.ceil(groups.length / per);
      detail = row ? `loop · ${began} of at most ${d.loop!.max}` : `loop · at most ${d.loop!.max}`;
    }
    b.nodes.push({ ...base, kind: d.switch ? "switch" : "loop", detail, ...SIZES.switch });
    if (notTaken.length <= EACH_EXPAND_LIMIT) {
      notTaken.forEach((r, i) => {
        const sub = addSlot(b, `${id}/n${i}`, undefined, [r]);
        b.edges.push({ from: id, to: sub.entry });
      });
    }
    if (groups.length === 0 || groups.length > EACH_EXPAND_LIMIT) return { entry: id, exit: id };
    let prev = id;
    groups.forEach((g, i) => {
      const sub = addSlot(b, `${id}/s${i}`, undefined, g);
      b.edges.push({ from: prev, to: sub.entry });
      prev = sub.exit;
    });
    return { entry: id, exit: prev };
  }

  if (d.subjob) {
    const subjobId = (row?.subjob as { id?: string } | undefined)?.id;
    const name = d.subjob.name ?? row?.subjob?.name;
    b.nodes.push({ ...base, kind: "subjob", subjobId,
                   detail: `sub-job${name ? ` · ${name}` : ""}`,
                   ...SIZES.subjob });
    return { entry: id, exit: id };
  }

  const what = row && isNotTaken(row) ? "branch not taken"
    : d.if !== undefined && state === "SKIPPED" ? "skipped (if false)"
    : d.wait ? (d.wait.signal ? `wait · signal ${d.wait.signal}` : d.wait.for ? `wait · ${d.wait.for}` : `wait · until ${d.wait.until}`)
    : attempts.length > 1 ? `${attempts.length} attempts`
    : d.image ?? (d.run ? `$ ${d.run.trim().split("\n")[0]}` : d.cmd ? d.cmd.join(" ") : "task");
  b.nodes.push({ ...base, kind: "task", detail: what, ...SIZES.task });
  return { entry: id, exit: id };
}

// A row of a switch's branch not taken (the server's words: src/flow/kinds/sequence.cc).
export const NOT_TAKEN = "not run: the switch took another branch";
function isNotTaken(r: TaskRow): boolean {
  return r.state === "SKIPPED" && !!r.error?.startsWith(NOT_TAKEN);
}

// Matches the slots of a parallel's children (definitions) with the groups of rows that
// ran: by name first, then the rest in order.
export function matchByName(defs: TaskDef[], groups: TaskRow[][]): (TaskRow[] | undefined)[] {
  const out: (TaskRow[] | undefined)[] = new Array(defs.length).fill(undefined);
  const used = new Set<number>();
  defs.forEach((d, i) => {
    const j = groups.findIndex((g, k) => !used.has(k) && g[0].name === d.name);
    if (j >= 0) { out[i] = groups[j]; used.add(j); }
  });
  const rest = groups.filter((_, k) => !used.has(k));
  defs.forEach((_, i) => { if (!out[i] && rest.length) out[i] = rest.shift(); });
  return out;
}

// The graph of a job, not yet laid out (x, y are 0). A graph job's top-level edges are
// its plan's (POST /jobs/plan): none until the plan is given.
export function buildGraph(job: JobLike, plan?: Plan | null): { nodes: GraphNode[]; edges: Edge[] } {
  const rows = job.execution ?? [];
  const children = new Map<string, TaskRow[]>();
  const top = new Map<number, TaskRow[]>();
  for (const r of rows) {
    if (r.parentId) {
      const l = children.get(r.parentId);
      if (l) l.push(r); else children.set(r.parentId, [r]);
    } else {
      const l = top.get(r.position);
      if (l) l.push(r); else top.set(r.position, [r]);
    }
  }
  const b: Builder = { nodes: [], edges: [], children };
  const graph = isGraphJob(job);
  const slots: { entry: string; exit: string }[] = [];
  let prev: string | undefined;
  (job.tasks ?? []).forEach((def, i) => {
    // A top-level slot's rows: its attempts (retries and restarts), oldest first.
    const attempts = (top.get(i + 1) ?? []).sort((a, c) =>
      (a.retry?.attempts ?? 0) - (c.retry?.attempts ?? 0) || cmp(a.createdAt, c.createdAt) || cmp(a.id, c.id));
    const s = addSlot(b, String(i + 1), def, attempts);
    slots.push(s);
    if (prev && !graph) b.edges.push({ from: prev, to: s.entry });
    prev = s.exit;
  });
  if (graph && plan && plan.tasks.length === slots.length) {
    const byName = new Map<string, number>();
    plan.tasks.forEach((t, i) => { if (!byName.has(t.name)) byName.set(t.name, i); });
    plan.tasks.forEach((t, i) => {
      for (const need of t.needs) {
        const j = byName.get(need);
        if (j === undefined) continue;
        const parts = [t.triggerRule !== "all_success" ? t.triggerRule : "", t.when?.[need] ? `when ${t.when[need]}` : ""];
        const label = parts.filter(Boolean).join(", ");
        b.edges.push({ from: slots[j].exit, to: slots[i].entry, ...(label ? { label } : {}) });
      }
    });
  }
  // The job's cleanup, after its tasks (a graph's: after each task nothing follows):
  // onFailure, then finally, each run's, oldest first.
  const cleanup = (top.get((job.tasks ?? []).length + 1) ?? []).filter(isHandler)
    .sort((a, c) => cmp(a.createdAt, c.createdAt) || cmp(a.id, c.id));
  let ends = graph ? slots.map((s) => s.exit).filter((x) => !b.edges.some((e) => e.from === x))
    : prev ? [prev] : [];
  cleanup.forEach((r, i) => {
    const s = addSteps(b, `c${i}`, [r], "cleanup");
    for (const from of ends) b.edges.push({ from, to: s.entry });
    ends = [s.exit];
  });
  return b;
}

// Lays the graph out top to bottom.
export function layoutGraph(g: { nodes: GraphNode[]; edges: Edge[] }): GraphModel {
  const d = new dagre.graphlib.Graph();
  d.setGraph({ rankdir: "TB", nodesep: 20, ranksep: 32, marginx: 16, marginy: 16 });
  d.setDefaultEdgeLabel(() => ({}));
  for (const n of g.nodes) d.setNode(n.id, { width: n.width, height: n.height });
  for (const e of g.edges) d.setEdge(e.from, e.to, e.label ? { label: e.label, width: Math.min(240, e.label.length * 6.5), height: 14 } : {});
  dagre.layout(d);
  const nodes = g.nodes.map((n) => { const p = d.node(n.id); return { ...n, x: p.x, y: p.y }; });
  const edges = g.edges.map((e) => {
    const at = d.edge(e.from, e.to);
    const points = (at?.points ?? []).map((p: { x: number; y: number }) => ({ x: p.x, y: p.y }));
    return { ...e, points, ...(e.label && at?.x !== undefined ? { labelAt: { x: at.x, y: at.y } } : {}) };
  });
  const gl = d.graph();
  return { nodes, edges, width: gl.width ?? 0, height: gl.height ?? 0 };
}

export function jobGraph(job: JobLike, plan?: Plan | null): GraphModel { return layoutGraph(buildGraph(job, plan)); }

// The node that shows a task row (any of its attempts), for the selection.
export function nodeOfTask(model: { nodes: GraphNode[] }, taskId: string | undefined): GraphNode | undefined {
  if (!taskId) return undefined;
  return model.nodes.find((n) => n.attempts.some((a) => a.id === taskId));
}

// Every attempt of the slot `taskId` is in (oldest first), from the execution rows alone:
// rows with the same parent and position, grouped as retries.
export function attemptsOf(rows: TaskRow[], taskId: string): TaskRow[] {
  const row = rows.find((r) => r.id === taskId);
  if (!row) return [];
  const siblings = rows.filter((r) => r.parentId === row.parentId && (r.parentId || r.position === row.position));
  return groupAttempts(siblings).find((g) => g.some((r) => r.id === taskId)) ?? [row];
}
