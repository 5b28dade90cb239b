// A progress bar of fixed size (0..100), with its value for assistive technology.
export function ProgressBar({ value, state, label }: { value: number; state?: string; label?: string }) {
  const v = Math.max(0, Math.min(100, Number.isFinite(value) ? value : 0));
  return (
    <span class="ui-progress" role="progressbar" aria-valuemin={0} aria-valuemax={100}
          aria-valuenow={Math.round(v)} aria-label={label ?? "progress"}>
      <span class={`ui-progress-fill ui-fill-${(state ?? "running").toLowerCase()}`} style={{ width: `${v}%` }} />
    </span>
  );
}
