// Nodes: name, host, status, CPU (with a sparkline since the page was first opened),
// memory, tasks, started, last heartbeat.
import { useCallback, useEffect, useState } from "preact/hooks";
import { api, type Node } from "../api";
import { formatBytes, formatPercent, formatTime, relativeTime } from "../format";
import { Sparkline } from "../components/Sparkline";
import { StateBadge } from "../components/StateBadge";
import { ErrorNotice } from "../components/Notice";
import { useKeys } from "../keys";
import { nodeCpu, SAMPLE_MS, samplingSince } from "./samplers";

export function NodesPage() {
  const [nodes, setNodes] = useState<Node[]>();
  const [error, setError] = useState<unknown>();
  const [now, setNow] = useState(Date.now());
  const [selected, setSelected] = useState(0);
  const sample = useCallback(async () => {
    try {
      const ns = await api.nodes();
      const at = Date.now();
      samplingSince.nodes ??= at;
      for (const n of ns) nodeCpu.add(n.id, { at, value: n.cpuPercent });
      setNodes(ns); setError(undefined); setNow(at);
    } catch (e) { setError(e); }
  }, []);
  useEffect(() => { void sample(); const t = setInterval(sample, SAMPLE_MS); return () => clearInterval(t); }, [sample]);
  const list = nodes ?? [];
  useKeys({
    down: () => { setSelected((i) => Math.min(list.length - 1, i + 1)); },
    up: () => { setSelected((i) => Math.max(0, i - 1)); },
  });
  return (
    <section>
      <div class="ui-head"><h1>Nodes</h1></div>
      <p class="ui-note">Charts: CPU sampled every 5 s since this page was opened
        {samplingSince.nodes ? ` (${formatTime(new Date(samplingSince.nodes).toISOString())})` : ""}; kept while you stay in the app.</p>
      <ErrorNotice error={error} />
      <div class="ui-table-wrap">
        <table class="ui-table ui-nodes-table">
          <thead><tr><th scope="col">Name</th><th scope="col" class="ui-hide-phone">Hostname</th><th scope="col">Status</th>
            <th scope="col" class="ui-num">CPU</th><th scope="col">CPU over time</th><th scope="col" class="ui-num ui-hide-phone">Memory</th>
            <th scope="col" class="ui-num">Tasks</th><th scope="col" class="ui-hide-phone">Started</th><th scope="col">Last heartbeat</th></tr></thead>
          <tbody>
            {list.map((n, i) => (
              <tr key={n.id} data-node={n.id} class={i === selected ? "ui-selected" : undefined} onClick={() => setSelected(i)}>
                <td><span class="ui-job-name">{n.name}</span><span class="ui-job-desc" title={n.id}>{n.queue ? `queue ${n.queue}` : n.id}</span></td>
                <td class="ui-hide-phone">{n.hostname}</td>
                <td><StateBadge state={n.status} /></td>
                <td class="ui-num">{formatPercent(n.cpuPercent)}</td>
                <td><Sparkline values={nodeCpu.values(n.id)} max={100} label={`CPU of ${n.name}, last ${nodeCpu.values(n.id).length} samples, now ${formatPercent(n.cpuPercent)}`} /></td>
                <td class="ui-num ui-hide-phone">{formatBytes(n.memoryBytes)}</td>
                <td class="ui-num">{n.taskCount}</td>
                <td class="ui-hide-phone" title={formatTime(n.startedAt)}>{relativeTime(n.startedAt, now)}</td>
                <td title={formatTime(n.lastHeartbeatAt)}>{relativeTime(n.lastHeartbeatAt, now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {nodes && list.length === 0 && <p class="ui-empty">No nodes have reported.</p>}
      </div>
    </section>
  );
}
