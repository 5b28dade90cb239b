// The job's definition for the Definition tab: the fields a user wrote (not the runtime
// ones the server adds), as YAML (a small emitter for JSON values) or JSON.
import type { Job } from "../api";

const RUNTIME = new Set(["id", "state", "createdAt", "startedAt", "completedAt", "failedAt", "position",
  "taskCount", "progress", "result", "error", "execution", "context", "createdBy", "schedule", "parentId",
  "deleteAt", "permissions"]);

export function definitionOf(job: Job): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(job)) if (!RUNTIME.has(k) && v !== undefined) out[k] = v;
  return out;
}

const PLAIN = /^[A-Za-z0-9_./()$][A-Za-z0-9_ ./()$'=+,@-]*$/;
const SPECIAL = /^(true|false|yes|no|on|off|null|~|y|n|[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?|0x[0-9a-fA-F]+|\.inf|\.nan)$/i;

function scalar(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  const s = String(v);
  if (s !== "" && PLAIN.test(s) && !SPECIAL.test(s) && s.trim() === s) return s;
  return JSON.stringify(s);
}

function isBlock(v: unknown): v is string { return typeof v === "string" && v.includes("\n"); }

function block(s: string, pad: string): string[] {
  const chomp = s.endsWith("\n") ? (s.endsWith("\n\n") ? "+" : "") : "-";
  const body = s.endsWith("\n") ? s.slice(0, -1) : s;
  const indicator = /^\s/.test(body) ? "2" : "";
  return [`|${indicator}${chomp}`, ...body.split("\n").map((l) => (l ? pad + l : ""))];
}

function emit(v: unknown, indent: number): string[] {
  const pad = " ".repeat(indent);
  if (Array.isArray(v)) {
    const out: string[] = [];
    for (const item of v) {
      if (isBlock(item)) { const [h, ...rest] = block(item, pad + "  "); out.push(`${pad}- ${h}`, ...rest); }
      else if (item !== null && typeof item === "object" && (Array.isArray(item) ? item.length : Object.keys(item).length)) {
        const lines = emit(item, indent + 2);
        out.push(`${pad}- ${lines[0].slice(indent + 2)}`, ...lines.slice(1));
      } else out.push(`${pad}- ${empty(item) ?? scalar(item)}`);
    }
    return out;
  }
  if (v !== null && typeof v === "object") {
    const out: string[] = [];
    for (const [k, val] of Object.entries(v).sort(([a], [b]) => rank(a) - rank(b))) {
      const key = scalar(k);
      if (isBlock(val)) { const [h, ...rest] = block(val, pad + "  "); out.push(`${pad}${key}: ${h}`, ...rest); }
      else if (val !== null && typeof val === "object" && empty(val) === undefined) {
        out.push(`${pad}${key}:`, ...emit(val, indent + 2));
      } else out.push(`${pad}${key}: ${empty(val) ?? scalar(val)}`);
    }
    return out;
  }
  return [pad + scalar(v)];
}

// The order people write a job in: what it is first, what it runs last (the server
// answers keys in alphabetical order). Other keys keep their order, in the middle.
const FIRST = ["name", "description", "tags", "var", "if", "inputs", "secrets", "schedule", "defaults", "queue",
  "image", "run", "cmd", "entrypoint", "env", "files"];
const LAST = ["pre", "post", "retry", "timeout", "output", "list", "concurrency", "parallel", "each", "subjob", "task", "tasks"];
function rank(k: string) {
  const f = FIRST.indexOf(k);
  if (f >= 0) return f;
  const l = LAST.indexOf(k);
  return l >= 0 ? 100 + l : 50;
}

function empty(v: unknown): string | undefined {
  if (Array.isArray(v) && v.length === 0) return "[]";
  if (v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0) return "{}";
  return undefined;
}

export function toYaml(v: unknown): string { return emit(v, 0).join("\n") + "\n"; }
