import { sparklinePath } from "./sparkline";

// An inline SVG sparkline of fixed size, so that rows do not move while samples arrive.
export function Sparkline({ values, width = 120, height = 28, max, minMax, label }:
    { values: number[]; width?: number; height?: number; max?: number; minMax?: number; label: string }) {
  const d = sparklinePath(values, width, height, { max, minMax, pad: 2 });
  return (
    <svg class="ui-spark" width={width} height={height} viewBox={`0 0 ${width} ${height}`}
         role="img" aria-label={label}>
      <line x1="0" x2={width} y1={height - 1} y2={height - 1} class="ui-spark-base" />
      {d && <path d={d} class="ui-spark-line" fill="none" />}
    </svg>
  );
}
