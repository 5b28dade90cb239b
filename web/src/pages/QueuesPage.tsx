// Queues: name, depth, subscribers, unacked, a depth sparkline since the page was first
// opened, and delete (admins, with a confirmation).
import { useCallback, useEffect, useState } from "preact/hooks";
import { api, type Queue } from "../api";
import { useIdentity, isAdmin } from "../auth";
import { formatTime } from "../format";
import { Sparkline } from "../components/Sparkline";
import { ConfirmDialog } from "../components/Dialog";
import { ErrorNotice } from "../components/Notice";
import { request } from "../api";
import { useKeys } from "../keys";
import { queueDepth, queueUnacked, SAMPLE_MS, samplingSince } from "./samplers";

export function QueuesPage() {
  const identity = useIdentity();
  const admin = isAdmin(identity);
  const [queues, setQueues] = useState<Queue[]>();
  const [error, setError] = useState<unknown>();
  const [, setTick] = useState(0);
  const [confirm, setConfirm] = useState<Queue>();
  const [flash, setFlash] = useState<{ text: string; bad?: boolean }>();
  const [selected, setSelected] = useState(0);
  const sample = useCallback(async () => {
    try {
      const qs = await api.queues();
      const at = Date.now();
      samplingSince.queues ??= at;
      for (const q of qs) { queueDepth.add(q.name, { at, value: q.size }); queueUnacked.add(q.name, { at, value: q.unacked }); }
      setQueues(qs); setError(undefined); setTick((t) => t + 1);
    } catch (e) { setError(e); }
  }, []);
  useEffect(() => { void sample(); const t = setInterval(sample, SAMPLE_MS); return () => clearInterval(t); }, [sample]);
  const list = queues ?? [];
  useKeys({
    down: () => { setSelected((i) => Math.min(list.length - 1, i + 1)); },
    up: () => { setSelected((i) => Math.max(0, i - 1)); },
  });
  const remove = async (q: Queue) => {
    setConfirm(undefined);
    try {
      await request("DELETE", `/queues/${encodeURIComponent(q.name)}`);
      setFlash({ text: `Deleted queue ${q.name}.` });
      await sample();
    } catch (e) { setFlash({ text: `Could not delete ${q.name}: ${(e as Error).message}`, bad: true }); }
  };
  // The engine's own queues (x-…) cannot be deleted; the server refuses them.
  const deletable = (q: Queue) => admin && !q.name.startsWith("x-");
  return (
    <section>
      <div class="ui-head"><h1>Queues</h1></div>
      <p class="ui-note">Charts: depth sampled every 5 s since this page was opened
        {samplingSince.queues ? ` (${formatTime(new Date(samplingSince.queues).toISOString())})` : ""}; kept while you stay in the app.</p>
      <div class="ui-flash" role="status" aria-live="polite">{flash && <span class={flash.bad ? "ui-flash-bad" : ""}>{flash.text}</span>}</div>
      <ErrorNotice error={error} />
      <div class="ui-table-wrap">
        <table class="ui-table ui-queues-table">
          <thead><tr><th scope="col">Name</th><th scope="col" class="ui-num">Size</th><th scope="col" class="ui-num ui-hide-phone">Subscribers</th>
            <th scope="col" class="ui-num ui-hide-phone">Unacked</th><th scope="col">Depth over time</th>
            {admin && <th scope="col"><span class="ui-visually-hidden">Actions</span></th>}</tr></thead>
          <tbody>
            {list.map((q, i) => (
              <tr key={q.name} data-queue={q.name} class={i === selected ? "ui-selected" : undefined} onClick={() => setSelected(i)}>
                <td><code>{q.name}</code></td>
                <td class="ui-num">{q.size}</td>
                <td class="ui-num ui-hide-phone">{q.subscribers}</td>
                <td class="ui-num ui-hide-phone">{q.unacked}</td>
                <td><Sparkline values={queueDepth.values(q.name)} minMax={1} label={`depth of ${q.name}, last ${queueDepth.values(q.name).length} samples, now ${q.size}`} /></td>
                {admin && <td class="ui-actions">{deletable(q) &&
                  <button type="button" class="ui-danger" onClick={() => setConfirm(q)} aria-label={`Delete queue ${q.name}`}>Delete</button>}</td>}
              </tr>
            ))}
          </tbody>
        </table>
        {queues && list.length === 0 && <p class="ui-empty">No queues.</p>}
      </div>
      {confirm && (
        <ConfirmDialog title={`Delete queue ${confirm.name}?`} confirmLabel="Delete queue" danger
                       onClose={() => setConfirm(undefined)} onConfirm={() => void remove(confirm)}>
          <p>The {confirm.size} {confirm.size === 1 ? "message" : "messages"} waiting in it are deleted with it. The server refuses while a worker reads it.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}
