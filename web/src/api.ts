// The REST API of docs/api.md, typed, as the UI uses it. Every call goes through
// `request`, which adds the credentials (auth.ts) and turns an error answer into an
// ApiError carrying the server's message and, for a refused document, its problems.

export type JobState =
  | "PENDING" | "SCHEDULED" | "RUNNING" | "COMPLETED" | "FAILED" | "CANCELLED" | "PAUSED";
export type RerunMode = "failed_only" | "from_failed" | "all";
export type TaskState =
  | "CREATED" | "PENDING" | "SCHEDULED" | "RUNNING" | "COMPLETED" | "FAILED"
  | "CANCELLED" | "STOPPED" | "SKIPPED";

export interface Page<T> {
  items: T[];
  number: number;
  size: number;
  totalPages: number;
  totalItems: number;
}

export interface JobSummary {
  id: string;
  parentId?: string;
  name?: string;
  description?: string;
  tags?: string[];
  inputs?: Record<string, string>;
  output?: string;
  state: JobState;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  failedAt?: string;
  position: number;
  taskCount: number;
  progress: number;
  result?: string;
  error?: string;
  // While its cleanup (onFailure, finally) runs: the state it will end in.
  ending?: JobState;
  schedule?: { id: string; cron: string };
  createdBy?: { username: string };
}

// A task as defined in a job (the job's `tasks`), or a task row of its execution, which
// adds the runtime fields.
export interface TaskDef {
  name?: string;
  description?: string;
  var?: string;
  image?: string;
  run?: string;
  cmd?: string[];
  entrypoint?: string[];
  env?: Record<string, string>;
  files?: Record<string, string>;
  queue?: string;
  if?: string;
  timeout?: string;
  tags?: string[];
  retry?: { limit?: number; attempts?: number };
  parallel?: { tasks: TaskDef[]; completions?: number };
  each?: { list: string; task: TaskDef; var?: string; concurrency?: number;
           size?: number; completions?: number; index?: number };
  subjob?: { id?: string; name?: string; tasks?: TaskDef[] };
  switch?: { value: string; cases?: Record<string, TaskDef[]>; default?: TaskDef[]; completions?: number };
  loop?: { tasks: TaskDef[]; max: number; while?: string; until?: string; completions?: number };
  // A wait, holding no worker: for a duration, until a time, or for a signal (docs/wait.md).
  wait?: { for?: string; until?: string; signal?: string; timeout?: string };
  // A fallback: what runs in the task's place when it finally fails (docs/job-format.md).
  onFailure?: { tasks: TaskDef[]; then: "fail" | "continue" };
  // Set by the engine on the rows that run cleanup: a task's fallback, a job's cleanup.
  handles?: "onFailure" | "job.onFailure" | "job.finally";
  pre?: TaskDef[];
  post?: TaskDef[];
  [key: string]: unknown;
}

export interface TaskRow extends TaskDef {
  id: string;
  jobId: string;
  parentId?: string;
  position: number;
  state: TaskState;
  createdAt: string;
  scheduledAt?: string;
  startedAt?: string;
  completedAt?: string;
  failedAt?: string;
  error?: string;
  result?: string;
  nodeId?: string;
  progress: number;
  redelivered: number;
  // Why a failed runnable row failed (what `retry.on` matches), and its exit code.
  reason?: "exit" | "timeout" | "oom" | "lost" | "error";
  exitCode?: number;
}

export interface Job extends JobSummary {
  tasks: TaskDef[];
  onFailure?: TaskDef[];
  finally?: TaskDef[];
  execution: TaskRow[];
  context?: Record<string, unknown>;
  [key: string]: unknown;
}

// POST /jobs/plan: a job's execution plan (docs/api.md). `needs` are the task names of
// the same list it waits for (in a sequence, the one before it); `when` a need's edge
// condition by name.
export interface PlanTask {
  name: string;
  kind: string;
  stage: number;
  needs: string[];
  triggerRule: string;
  when?: Record<string, string>;
}
export interface Plan { name: string; mode: string; graph: boolean; stages: string[][]; tasks: PlanTask[] }

export interface LogPart {
  id: string;
  number: number;
  taskId: string;
  contents: string;
  createdAt: string;
}

export interface Queue { name: string; size: number; subscribers: number; unacked: number }

export interface Node {
  id: string;
  name: string;
  hostname: string;
  startedAt: string;
  lastHeartbeatAt: string;
  cpuPercent: number;
  memoryBytes: number;
  taskCount: number;
  status: "UP" | "DOWN" | string;
  queue?: string;
  version?: string;
}

export interface ScheduledJob {
  id: string;
  name?: string;
  description?: string;
  tags?: string[];
  state: "ACTIVE" | "PAUSED";
  cron: string;
  schedule: { cron: string; timezone: string; overlap: string };
  createdAt: string;
  updatedAt: string;
  nextRunAt?: string;
  lastJobId?: string;
  tasks?: TaskDef[];
  [key: string]: unknown;
}

// A problem the server found in a submitted document, on its line (1-based).
export interface Problem { line: number; column: number; path: string; message: string }

export class ApiError extends Error {
  constructor(public status: number, message: string, public problems: Problem[] = []) {
    super(message);
  }
}

// The credentials sent with every request: HTTP basic or an API key (Bearer). Kept in
// sessionStorage by auth.ts; null when authentication is off or not yet given.
let authorization: string | null = null;
export function setAuthorization(value: string | null) { authorization = value; }
export function authHeader(): Record<string, string> {
  return authorization ? { Authorization: authorization } : {};
}

// Listeners told of a 401, so that the app shows its login form.
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(f: () => void) {
  unauthorizedListeners.add(f);
  return () => unauthorizedListeners.delete(f);
}

export async function request<T>(method: string, path: string,
                                 body?: string, contentType = "application/json"): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", ...authHeader() };
  if (body !== undefined) headers["Content-Type"] = contentType;
  // credentials: "omit": the browser neither sends its own stored HTTP credentials nor
  // prompts for them on a 401 (the UI asks with its own form and sends the header).
  const res = await fetch(path, { method, headers, body, credentials: "omit" });
  const text = await res.text();
  let data: any = undefined;
  try { data = text ? JSON.parse(text) : undefined; } catch { data = undefined; }
  if (!res.ok) {
    if (res.status === 401) unauthorizedListeners.forEach((f) => f());
    throw new ApiError(res.status, data?.message ?? `${res.status} ${res.statusText}`,
                       data?.errors ?? []);
  }
  return data as T;
}

function query(params: Record<string, string | number | undefined>) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

export const api = {
  health: () => request<{ status: string; version: string }>("GET", "/health"),
  // q: free text and `tag:x` words; state: a comma-separated list of job states.
  jobs: (p: { page?: number; size?: number; q?: string; state?: string }) =>
    request<Page<JobSummary>>("GET", `/jobs${query(p)}`),
  job: (id: string) => request<Job>("GET", `/jobs/${id}`),
  jobLog: (id: string, page = 1, size = 100) =>
    request<Page<LogPart>>("GET", `/jobs/${id}/log${query({ page, size })}`),
  task: (id: string) => request<TaskRow>("GET", `/tasks/${id}`),
  // Tork's order: newest part first.
  taskLog: (id: string, page = 1, size = 100) =>
    request<Page<LogPart>>("GET", `/tasks/${id}/log${query({ page, size })}`),
  submit: (doc: string, type = "text/yaml") => request<JobSummary>("POST", "/jobs", doc, type),
  // Validates a job without storing it: resolves when valid, else throws an ApiError with
  // the problems by line.
  validate: (doc: string, type = "text/yaml") =>
    request<{ valid: true }>("POST", "/jobs?dryRun=true", doc, type),
  plan: (doc: string, type = "application/json") => request<Plan>("POST", "/jobs/plan", doc, type),
  cancel: (id: string) => request<unknown>("PUT", `/jobs/${id}/cancel`),
  restart: (id: string) => request<unknown>("PUT", `/jobs/${id}/restart`),
  pause: (id: string) => request<unknown>("PUT", `/jobs/${id}/pause`),
  skip: (taskId: string, result: string) =>
    request<unknown>("PUT", `/tasks/${taskId}/skip`, JSON.stringify({ result })),
  resume: (id: string) => request<unknown>("PUT", `/jobs/${id}/resume`),
  // mode: failed_only (the server's default), from_failed or all.
  rerun: (id: string, body: { mode?: RerunMode; from?: string; inputs?: Record<string, string> }) =>
    request<unknown>("PUT", `/jobs/${id}/rerun`, JSON.stringify(body)),
  remove: (id: string) => request<unknown>("DELETE", `/jobs/${id}`),
  queues: () => request<Queue[]>("GET", "/queues"),
  nodes: () => request<Node[]>("GET", "/nodes"),
  metrics: () => request<Metrics>("GET", "/metrics"),
  scheduled: (p: { page?: number; size?: number }) =>
    request<Page<ScheduledJob>>("GET", `/scheduled-jobs${query(p)}`),
  scheduledJob: (id: string) => request<ScheduledJob>("GET", `/scheduled-jobs/${id}`),
  schedule: (doc: string, type = "text/yaml") =>
    request<ScheduledJob>("POST", "/scheduled-jobs", doc, type),
  validateSchedule: (doc: string, type = "text/yaml") =>
    request<{ valid: true }>("POST", "/scheduled-jobs?dryRun=true", doc, type),
  pauseScheduled: (id: string) => request<unknown>("PUT", `/scheduled-jobs/${id}/pause`),
  resumeScheduled: (id: string) => request<unknown>("PUT", `/scheduled-jobs/${id}/resume`),
  deleteScheduled: (id: string) => request<unknown>("DELETE", `/scheduled-jobs/${id}`),
  // Who the credentials are (beyond Tork): {username, roles}; 401 without credentials
  // when authentication is on; {"username": ""} when it is off.
  whoami: () => request<{ username: string; roles: string[]; authEnabled: boolean }>("GET", "/whoami"),
};

// GET /metrics (Tork's JSON, with Baton's additions for the jobs page's cards).
export interface Metrics {
  jobs: { running: number; failedLastHour?: number; endedLastHour?: number };
  tasks: { running: number };
  nodes: { online: number; cpuPercent: number };
  queues?: { size: number };
}
