// The editor: a job (or scheduled job) in YAML, validated by the server as you type
// (POST /jobs?dryRun=true), every problem marked on its line and listed below; an inputs
// form and, for a scheduled job, its schedule fields, both written into the YAML; submit.
//
//   #/editor                  a new job from a template
//   #/editor?from=JOBID       a copy of that job (duplicate as new)
//   #/editor?schedule=1       a new scheduled job
//   #/scheduled/ID/edit       a scheduled job's new definition (PUT /scheduled-jobs/ID)
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, request, type JobSummary, type Problem, type ScheduledJob } from "../api";
import { navigate, href } from "../router";
import { editorExtensions, EditorState, EditorView } from "./editorSetup";
import { jobToYaml, minimalChange, readBlockMap, removeBlock, setBlockValue } from "./yaml";

export { jobToYaml };

export const JOB_TEMPLATE = `name: my job
description: says hello to whoever the inputs name
tags:
  - demo
inputs:
  who: world
output: "{{ tasks.greeting }}"
tasks:
  - name: greet
    var: greeting
    env:
      WHO: "{{ inputs.who }}"
    run: |
      echo -n "hello $WHO" > $TORK_OUTPUT
`;

const SCHEDULE_BLOCK = `schedule:
  cron: "0 * * * *"
  timezone: UTC
`;

function withSchedule(doc: string): string {
  if (readBlockMap(doc, "schedule").line >= 0) return doc;
  const ls = doc.split("\n");
  const at = ls.findIndex((l) => /^(inputs|tasks|output):/.test(l));
  const i = at < 0 ? ls.length : at;
  ls.splice(i, 0, ...SCHEDULE_BLOCK.trimEnd().split("\n"));
  return ls.join("\n");
}

// The unsent text of a new job (or scheduled job), kept while the app stays open, so that
// a look at another page does not lose it. Submitting or "Start over" clears it.
const drafts = new Map<string, string>();
const draftKey = (schedule: boolean) => (schedule ? "schedule" : "job");

type Status =
  | { kind: "idle" } | { kind: "checking" }
  | { kind: "valid"; name?: string; taskCount?: number }
  | { kind: "invalid"; message: string } | { kind: "unreachable"; message: string };

const OVERLAPS = ["allow", "skip", "buffer_one", "cancel_other"];

export function EditorPage({ params }: { params: Record<string, string> }) {
  const scheduleMode = params.schedule === "1";
  const editId = params.edit;
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const [doc, setDoc] = useState("");
  const [problems, setProblems] = useState<Problem[]>([]);
  const [status, setStatus] = useState<Status>({ kind: "idle" });
  const [loadError, setLoadError] = useState<string>();
  const [submitError, setSubmitError] = useState<string>();
  const [submitting, setSubmitting] = useState(false);
  const [newKey, setNewKey] = useState("");
  const [newValue, setNewValue] = useState("");
  const modeRef = useRef(scheduleMode);
  modeRef.current = scheduleMode;
  const seq = useRef(0);
  const submitRef = useRef<() => void>(() => {});
  // Only a new document (not a duplicate or an edit) is kept as a draft.
  const draftRef = useRef<((text: string) => void) | null>(null);
  draftRef.current = params.from || editId ? null : (text) => { drafts.set(draftKey(modeRef.current), text); };

  // An old server ignores `dryRun` and stores a valid job: then validating stops.
  const noDryRun = useRef(false);
  const validate = async (text: string): Promise<Problem[]> => {
    if (noDryRun.current) return [];
    const mine = ++seq.current;
    setStatus({ kind: "checking" });
    try {
      const r = await (modeRef.current ? api.validateSchedule(text) : api.validate(text)) as
        { valid?: boolean; name?: string; taskCount?: number; id?: string };
      if (r && r.valid === undefined && r.id) {
        noDryRun.current = true;
        setStatus({ kind: "unreachable", message: `this server does not validate without storing (no dryRun): it stored job ${r.id}; validation as you type is off` });
        return [];
      }
      if (mine === seq.current) { setProblems([]); setStatus({ kind: "valid", name: r?.name, taskCount: r?.taskCount }); }
      return [];
    } catch (e) {
      if (mine !== seq.current) return [];
      if (e instanceof ApiError && e.status === 400) {
        const ps = e.problems.length ? e.problems : [{ line: 0, column: 0, path: "", message: e.message }];
        setProblems(ps);
        setStatus({ kind: "invalid", message: e.message });
        return ps;
      }
      setProblems([]);
      setStatus({ kind: "unreachable", message: (e as Error).message });
      return [];
    }
  };

  // The editor is made once; what it shows is set when the source (template, job) loads.
  useEffect(() => {
    const v = new EditorView({
      parent: host.current!,
      state: EditorState.create({ doc: "", extensions: editorExtensions({
        validate, onChange: (text) => { setDoc(text); draftRef.current?.(text); },
        onSubmit: () => submitRef.current() }) }),
    });
    view.current = v;
    return () => { v.destroy(); view.current = null; };
  }, []);

  const replaceDoc = (text: string) => {
    const v = view.current;
    if (!v) return;
    const change = minimalChange(v.state.doc.toString(), text);
    if (change) v.dispatch({ changes: change });
  };

  useEffect(() => {
    let cancelled = false;
    setLoadError(undefined);
    setSubmitError(undefined);
    const set = (text: string) => { if (!cancelled) { replaceDoc(text); view.current?.focus(); } };
    if (params.from) {
      api.job(params.from).then((j) => set(scheduleMode ? withSchedule(jobToYaml(j)) : jobToYaml(j)),
        (e) => { if (!cancelled) setLoadError(`Could not load job ${params.from}: ${(e as Error).message}`); });
    } else if (editId) {
      api.scheduledJob(editId).then((s) => set(jobToYaml(s, { keepSchedule: true })),
        (e) => { if (!cancelled) setLoadError(`Could not load scheduled job ${editId}: ${(e as Error).message}`); });
    } else {
      set(drafts.get(draftKey(scheduleMode)) ?? (scheduleMode ? withSchedule(JOB_TEMPLATE) : JOB_TEMPLATE));
    }
    return () => { cancelled = true; };
  }, [params.from, editId]);

  const setMode = (schedule: boolean) => {
    const text = view.current?.state.doc.toString() ?? "";
    modeRef.current = schedule;
    replaceDoc(schedule ? withSchedule(text) : removeBlock(text, "schedule"));
    navigate("editor", { ...params, schedule: schedule ? "1" : undefined }, true);
  };

  const submit = async () => {
    const text = view.current?.state.doc.toString() ?? "";
    if (submitting) return;
    setSubmitting(true);
    setSubmitError(undefined);
    try {
      if (editId) {
        await request<ScheduledJob>("PUT", `/scheduled-jobs/${editId}`, text, "text/yaml");
        navigate(["scheduled", editId]);
      } else if (modeRef.current) {
        const s = await api.schedule(text);
        drafts.delete(draftKey(true));
        navigate(["scheduled", s.id]);
      } else {
        const j: JobSummary = await api.submit(text);
        if (!params.from) drafts.delete(draftKey(false));
        navigate(["jobs", j.id]);
      }
    } catch (e) {
      if (e instanceof ApiError && e.problems.length) { setProblems(e.problems); setStatus({ kind: "invalid", message: e.message }); }
      setSubmitError(`Not submitted: ${(e as Error).message}`);
    } finally { setSubmitting(false); }
  };
  submitRef.current = () => { void submit(); };

  const jump = (p: Problem) => {
    const v = view.current;
    if (!v) return;
    const n = Math.min(Math.max(1, p.line || 1), v.state.doc.lines);
    const line = v.state.doc.line(n);
    const at = Math.min(line.to, line.from + Math.max(0, (p.column || 1) - 1));
    v.dispatch({ selection: { anchor: at }, scrollIntoView: true });
    v.focus();
  };

  const inputs = readBlockMap(doc, "inputs");
  const schedule = readBlockMap(doc, "schedule");
  const sched = (k: string) => schedule.entries.find((e) => e.key === k && !e.nested)?.value ?? "";
  const setField = (block: string, k: string, value: string) => {
    replaceDoc(setBlockValue(view.current?.state.doc.toString() ?? "", block, k, value));
  };

  const title = editId ? "Edit scheduled job" : params.from ? "Duplicate job" : scheduleMode ? "New scheduled job" : "New job";
  return (
    <section class="ui-editor" onKeyDown={(e) => {
      if ((e.ctrlKey || e.metaKey) && e.key === "Enter" && !(e.target as HTMLElement).closest(".cm-editor")) { e.preventDefault(); void submit(); }
    }}>
      <div class="ui-head">
        <h1>{title}</h1>
        {params.from && <a href={href(["jobs", params.from])}>from job {params.from.slice(0, 12)}…</a>}
        {!editId && (
          <div class="ui-segmented ui-head-actions" role="tablist" aria-label="Kind of job">
            <button type="button" role="tab" aria-selected={!scheduleMode} onClick={() => setMode(false)}>Run once</button>
            <button type="button" role="tab" aria-selected={scheduleMode} onClick={() => setMode(true)}>On a schedule</button>
          </div>
        )}
      </div>
      {loadError && <div class="ui-error" role="alert">{loadError}</div>}
      <div class="ui-editor-layout">
        <div>
          <div class="ui-editor-box" ref={host} />
          <div class="ui-status" role="status" aria-live="polite" data-status={status.kind}
               data-name={status.kind === "valid" ? status.name : undefined}>
            {status.kind === "checking" && <span class="ui-status-checking">Checking…</span>}
            {status.kind === "valid" && <span class="ui-status-valid">✓ Valid{status.name ? ` — “${status.name}”` : ""}{status.taskCount !== undefined ? `, ${status.taskCount} ${status.taskCount === 1 ? "task" : "tasks"}` : ""}</span>}
            {status.kind === "invalid" && <span class="ui-status-invalid">✗ {problems.length} {problems.length === 1 ? "problem" : "problems"}</span>}
            {status.kind === "unreachable" && <span class="ui-status-invalid">Could not validate: {status.message}</span>}
          </div>
          {problems.length > 0 && (
            <ul class="ui-problems" aria-label="Problems">
              {problems.map((p, i) => (
                <li key={i}><button type="button" onClick={() => jump(p)}>
                  <span class="ui-problem-line">{p.line ? `Line ${p.line}${p.column ? `:${p.column}` : ""}` : "Document"}</span>
                  {p.path ? `${p.path}: ` : ""}{p.message}
                </button></li>
              ))}
            </ul>
          )}
        </div>
        <div class="ui-side">
          {(scheduleMode || editId) && (
            <div class="ui-panel">
              <h2>Schedule</h2>
              {schedule.editable ? (<>
                <label>Cron (minute hour day month weekday)
                  <input name="cron" value={sched("cron")} placeholder="0 * * * *" spellcheck={false}
                         onInput={(e) => setField("schedule", "cron", e.currentTarget.value)} /></label>
                <label>Time zone (IANA)
                  <input name="timezone" value={sched("timezone")} placeholder="UTC" spellcheck={false}
                         onInput={(e) => setField("schedule", "timezone", e.currentTarget.value)} /></label>
                <label>When the last run is still going
                  <select name="overlap" value={sched("overlap") || "allow"}
                          onChange={(e) => setField("schedule", "overlap", e.currentTarget.value)}>
                    {OVERLAPS.map((o) => <option key={o} value={o}>{o}</option>)}
                  </select></label>
              </>) : <p class="ui-note">This schedule is written in a style the form does not edit; edit it in the YAML.</p>}
              <p class="ui-note">See the schedule’s documentation (docs/schedules.md) for catch-up settings.</p>
            </div>
          )}
          <div class="ui-panel">
            <h2>Inputs</h2>
            {!inputs.editable ? <p class="ui-note">These inputs are written in a style the form does not edit; edit them in the YAML.</p>
              : inputs.entries.length === 0 ? <p class="ui-note">This job has no inputs.</p>
              : inputs.entries.filter((e) => !e.nested).map((e) => (
                <label key={e.key}>{e.key}
                  <input name={`input-${e.key}`} value={e.value} spellcheck={false}
                         onInput={(ev) => setField("inputs", e.key, ev.currentTarget.value)} /></label>
              ))}
            {inputs.editable && (
              <form class="ui-add-input" onSubmit={(e) => {
                e.preventDefault();
                if (!newKey.trim()) return;
                setField("inputs", newKey.trim(), newValue);
                setNewKey(""); setNewValue("");
              }}>
                <input aria-label="New input's name" placeholder="name" value={newKey} onInput={(e) => setNewKey(e.currentTarget.value)} />
                <input aria-label="New input's value" placeholder="value" value={newValue} onInput={(e) => setNewValue(e.currentTarget.value)} />
                <button type="submit">Add</button>
              </form>
            )}
          </div>
          <div class="ui-panel">
            <div class="ui-submit-row">
              <button type="button" class="primary" disabled={submitting} onClick={() => void submit()}>
                {submitting ? "Submitting…" : editId ? "Save schedule" : scheduleMode ? "Create scheduled job" : "Submit job"}
              </button>
              <span class="ui-note"><kbd>Ctrl</kbd>/<kbd>⌘</kbd> <kbd>Enter</kbd></span>
              {!params.from && !editId && (
                <button type="button" title="Replace the text with the starter template" onClick={() => {
                  drafts.delete(draftKey(scheduleMode));
                  replaceDoc(scheduleMode ? withSchedule(JOB_TEMPLATE) : JOB_TEMPLATE);
                }}>Start over</button>
              )}
            </div>
            {submitError && <div class="ui-error" role="alert">{submitError}</div>}
          </div>
        </div>
      </div>
    </section>
  );
}
