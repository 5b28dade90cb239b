// A small YAML writer for JSON values, and the line-level edits the editor's forms make
// to a job document. Hand-written rather than the `yaml` package (~30 kB gzipped) because
// the UI only ever writes JSON values back out and edits flat top-level maps.
import type { Job, ScheduledJob } from "../api";

const RESERVED = /^(true|false|yes|no|on|off|null|y|n|~)$/i;
const NUMBER_LIKE = /^[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^0x[0-9a-f]+$|^0o[0-7]+$|^[-+]?\.(inf|nan)$/i;

// Whether `s` can be written as a plain (unquoted) scalar and read back as the same string.
export function isPlainSafe(s: string): boolean {
  if (s === "" || s.trim() !== s) return false;
  if (RESERVED.test(s) || NUMBER_LIKE.test(s)) return false;
  // Indicators that start something else: flow collections, anchors, tags, comments,
  // block scalars, quotes, directives, sequence/map entries.
  if (/^[-?:,\[\]{}#&*!|>'"%@`]/.test(s)) return false;
  if (/[\x00-\x1f\x7f\u2028\u2029\ufeff]/.test(s)) return false;
  if (s.includes(": ") || s.includes(" #") || s.endsWith(":")) return false;
  return true;
}

// A string as a one-line scalar: plain when safe, else double-quoted (JSON's escapes are
// valid in YAML's double-quoted style).
export function scalar(s: string): string {
  return isPlainSafe(s) ? s : JSON.stringify(s);
}

function key(k: string): string { return scalar(k); }

// A multi-line string as a literal block scalar, with the chomping indicator that keeps
// its trailing newlines exact, and an indentation indicator when it starts with a space.
function blockScalar(s: string, indent: string): string {
  const trailing = s.match(/\n*$/)![0].length;
  const chomp = trailing === 0 ? "-" : trailing === 1 ? "" : "+";
  const body = trailing === 0 ? s : s.slice(0, s.length - trailing);
  const lines = body.split("\n");
  const indicator = /^[ \n]/.test(s) ? "2" : "";
  const out = lines.map((l) => (l === "" ? "" : indent + "  " + l)).join("\n");
  // `+` keeps the extra newlines: they are written as empty lines after the body.
  const extra = chomp === "+" ? "\n".repeat(trailing - 1) : "";
  return `|${indicator}${chomp}\n${out}${extra}`;
}

function needsBlock(s: string): boolean {
  // Block scalars cannot carry other control characters or a carriage return; quote then.
  return s.includes("\n") && !/[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\ufeff]/.test(s) && !/[ \t]\n|[ \t]$/.test(s);
}

function isScalar(v: unknown): boolean {
  return v === null || typeof v !== "object" ||
         (Array.isArray(v) && v.length === 0) ||
         (!Array.isArray(v) && Object.keys(v as object).length === 0);
}

function inline(v: unknown, indent: string): string {
  if (v === null || v === undefined) return "null";
  if (typeof v === "string") return needsBlock(v) ? blockScalar(v, indent) : scalar(v);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (Array.isArray(v)) return "[]";
  return "{}";
}

function lines(v: unknown, indent: string): string {
  if (Array.isArray(v)) {
    return v.map((item) => {
      if (isScalar(item)) return `${indent}- ${inline(item, indent)}`;
      // The first line of a nested map or list follows the dash.
      const nested = lines(item, indent + "  ");
      return `${indent}- ${nested.slice(indent.length + 2)}`;
    }).join("\n");
  }
  const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
  return entries.map(([k, x]) => {
    if (isScalar(x)) return `${indent}${key(k)}: ${inline(x, indent)}`;
    return `${indent}${key(k)}:\n${lines(x, indent + "  ")}`;
  }).join("\n");
}

// Any JSON value as a YAML document (ending with a newline).
export function toYaml(v: unknown): string {
  if (isScalar(v)) return inline(v, "") + "\n";
  return lines(v, "") + "\n";
}

// Fields of a stored job or task that the server sets; not part of a definition.
const RUNTIME_JOB = new Set(["id", "parentId", "state", "createdAt", "startedAt", "completedAt",
  "failedAt", "cancelledAt", "position", "taskCount", "progress", "result", "error", "execution",
  "context", "schedule", "createdBy", "updatedAt", "nextRunAt", "lastJobId", "cron", "deleteAt"]);
const RUNTIME_TASK = new Set(["id", "jobId", "parentId", "position", "state", "createdAt",
  "scheduledAt", "startedAt", "completedAt", "failedAt", "cancelledAt", "error", "result",
  "nodeId", "progress", "redelivered"]);
// Top-level keys, in the order a person writes them.
const ORDER = ["name", "description", "tags", "schedule", "inputs", "secrets", "defaults",
  "timeout", "autoDelete", "webhooks", "permissions", "output", "tasks"];

// A task's keys in the order a person writes them (the server answers them sorted).
const TASK_ORDER = ["name", "description", "if", "var", "image", "queue", "priority", "timeout",
  "retry", "limits", "env", "files", "workdir", "mounts", "networks", "pre", "entrypoint", "cmd",
  "run", "post", "parallel", "each", "subjob", "list", "task", "tasks"];
function ordered(o: Record<string, unknown>): [string, unknown][] {
  const rank = (k: string) => { const i = TASK_ORDER.indexOf(k); return i < 0 ? TASK_ORDER.length : i; };
  return Object.entries(o).sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

function cleanTask(t: unknown): unknown {
  if (Array.isArray(t)) return t.map(cleanTask);
  if (t === null || typeof t !== "object") return t;
  const out: Record<string, unknown> = {};
  for (const [k, v] of ordered(t as Record<string, unknown>)) {
    if (RUNTIME_TASK.has(k)) continue;
    out[k] = k === "env" || k === "files" ? v : cleanTask(v);
  }
  return out;
}

// What the user wrote of a job (GET /jobs/{id}): its fields without the runtime ones the
// server adds, tasks' keys in a person's order; secrets as the server shows them. The job
// page's Definition tab.
export function definitionOf(job: Job | ScheduledJob): Record<string, unknown> {
  const src = job as Record<string, unknown>;
  const keys = [...ORDER, ...Object.keys(src).filter((k) => !ORDER.includes(k)).sort()];
  const def: Record<string, unknown> = {};
  for (const k of keys) {
    if (!(k in src) || src[k] === undefined || RUNTIME_JOB.has(k)) continue;
    def[k] = k === "tasks" ? cleanTask(src[k]) : src[k];
  }
  return def;
}

// The definition of a job (GET /jobs/{id}) or a scheduled job (GET /scheduled-jobs/{id})
// as a YAML document to submit anew: runtime fields dropped, `wait` dropped (a browser
// submission does not block), secrets dropped with a comment (the server never shows their
// values), and for a scheduled job its `schedule` block kept.
export function jobToYaml(job: Job | ScheduledJob, opts: { keepSchedule?: boolean } = {}): string {
  const def: Record<string, unknown> = {};
  const src = job as Record<string, unknown>;
  const keys = [...ORDER, ...Object.keys(src).filter((k) => !ORDER.includes(k)).sort()];
  let droppedSecrets = false;
  for (const k of keys) {
    if (!(k in src) || src[k] === undefined) continue;
    if (k === "schedule") {
      if (opts.keepSchedule && src.schedule && typeof src.schedule === "object") {
        const s = src.schedule as Record<string, unknown>;
        const sched: Record<string, unknown> = { cron: s.cron };
        if (s.timezone) sched.timezone = s.timezone;
        if (s.overlap) sched.overlap = s.overlap;
        if (s.catchUp) sched.catchUp = s.catchUp;
        def.schedule = sched;
      }
      continue;
    }
    if (RUNTIME_JOB.has(k) || k === "wait") continue;
    if (k === "secrets") { droppedSecrets = Object.keys(src[k] as object ?? {}).length > 0; continue; }
    def[k] = k === "tasks" ? cleanTask(src[k]) : src[k];
  }
  let head = droppedSecrets
    ? "# This job's secrets were not copied: the server never shows their values. Add them here.\n"
    : "";
  if (src.wait !== undefined) head += "# `wait` was left out: a submission from the browser does not block.\n";
  return head + toYaml(def);
}

// ---- Line-level edits of a top-level block map (`inputs:`, `schedule:`) ----

export interface BlockEntry { key: string; value: string; line: number /* 0-based */; nested?: boolean }
export interface BlockMap {
  line: number;        // the line of `key:` (0-based), -1 when absent
  end: number;         // the block's last line (0-based), its own line when empty
  entries: BlockEntry[];
  editable: boolean;   // false when written in a style the form does not edit (flow, odd indents)
}

function unquote(raw: string): string {
  const v = raw.trim();
  if (v.startsWith('"')) { try { return JSON.parse(v); } catch { return v.slice(1, -1); } }
  if (v.startsWith("'")) return v.slice(1, -1).replace(/''/g, "'");
  return v.replace(/\s+#.*$/, "");
}

// Reads the top-level map `name:` of a YAML text as its lines hold it: `  key: value`
// entries with one-line scalar values. An entry holding a nested map or list (`catchUp:`
// and the lines indented under it) is listed as `nested`, for the YAML alone to edit.
export function readBlockMap(text: string, name: string): BlockMap {
  const ls = text.split("\n");
  const head = new RegExp(`^${name}:\\s*(#.*)?$`);
  const line = ls.findIndex((l) => head.test(l));
  if (line < 0) {
    const flow = ls.findIndex((l) => l.startsWith(`${name}:`));
    return { line: flow, end: flow, entries: [], editable: flow < 0 };
  }
  const entries: BlockEntry[] = [];
  let editable = true;
  let indent: string | undefined;
  let end = line;
  for (let i = line + 1; i < ls.length; i++) {
    const l = ls[i];
    if (l.trim() === "" || l.trim().startsWith("#")) continue;
    if (!/^\s/.test(l)) break;
    end = i;
    const ind = l.match(/^\s*/)![0];
    indent ??= ind;
    if (ind.length > indent.length && entries.length && entries[entries.length - 1].nested) continue;
    if (ind !== indent) { editable = false; continue; }
    const m = l.slice(ind.length).match(/^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^:#]+?)\s*:(?:\s+(.*))?$/);
    if (!m) { editable = false; continue; }
    const value = m[2] ?? "";
    if (/^[|>\[{&*!]/.test(value.trim())) editable = false;
    const entry: BlockEntry = { key: unquote(m[1]), value: unquote(value), line: i };
    if (value.trim() === "") entry.nested = true;
    entries.push(entry);
  }
  return { line, end, entries, editable };
}

// Sets `name.key` to `value` in a YAML text: replaces the entry's value on its line, or
// adds the entry (and the block, before `tasks:` or at the end) when missing.
export function setBlockValue(text: string, name: string, k: string, value: string): string {
  const ls = text.split("\n");
  const block = readBlockMap(text, name);
  const entry = block.entries.find((e) => e.key === k && !e.nested);
  if (entry) {
    const l = ls[entry.line];
    const ind = l.match(/^\s*/)![0];
    ls[entry.line] = `${ind}${key(k)}: ${scalar(value)}`;
    return ls.join("\n");
  }
  const first = block.entries[0];
  const ind = first ? ls[first.line].match(/^\s*/)![0] : "  ";
  const newLine = `${ind}${key(k)}: ${scalar(value)}`;
  if (block.line >= 0) {
    ls.splice(block.end + 1, 0, newLine);
    return ls.join("\n");
  }
  const tasks = ls.findIndex((l) => /^tasks:/.test(l));
  const at = tasks >= 0 ? tasks : ls.length;
  ls.splice(at, 0, `${name}:`, newLine);
  return ls.join("\n");
}

// Removes the top-level block `name:` and its indented lines (comments and blank lines
// inside it included).
export function removeBlock(text: string, name: string): string {
  const ls = text.split("\n");
  const start = ls.findIndex((l) => l.startsWith(`${name}:`));
  if (start < 0) return text;
  let end = start + 1;
  while (end < ls.length && (/^\s/.test(ls[end]) || ls[end] === "") && !(ls[end] === "" && end === ls.length - 1)) end++;
  // Blank lines before the next top-level key stay.
  while (end > start + 1 && ls[end - 1].trim() === "") end--;
  ls.splice(start, end - start);
  return ls.join("\n");
}

// The smallest single replacement turning `a` into `b`, so that an edit made by a form
// field keeps the editor's cursor and undo history around it.
export function minimalChange(a: string, b: string): { from: number; to: number; insert: string } | null {
  if (a === b) return null;
  let start = 0;
  const max = Math.min(a.length, b.length);
  while (start < max && a[start] === b[start]) start++;
  let endA = a.length, endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA--; endB--; }
  return { from: start, to: endA, insert: b.slice(start, endB) };
}
