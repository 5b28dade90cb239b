// Small pieces the job page's parts share.

export function StateBadge(props: { state: string }) {
  const s = props.state === "NOT_REACHED" ? "not reached" : props.state.toLowerCase();
  return <span class={`job-badge job-s-${props.state}`} data-state={props.state}>{s}</span>;
}

// A timestamp in the viewer's time zone, with the date only when not today.
export function fmtTime(iso?: string): string {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString(undefined, { hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit" }) +
    `.${String(d.getMilliseconds()).padStart(3, "0")}`;
  return today ? time : `${d.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" })} ${time}`;
}
