// The geometry of a sparkline: samples scaled into a width × height box, as an SVG path.
// Pure, so that the scaling is tested (sparkline.test.ts).

export interface Sample { at: number; value: number }

// Builds the path of `values` drawn left to right over `width`, with 0 at the bottom and
// `max` (default: the largest value, at least `minMax`) at the top, inset by `pad` so a
// 2-px stroke is not clipped. One value is drawn as a flat line.
export function sparklinePath(values: number[], width: number, height: number,
                              opts: { max?: number; minMax?: number; pad?: number } = {}): string {
  if (values.length === 0) return "";
  const pad = opts.pad ?? 1;
  const top = opts.max ?? Math.max(opts.minMax ?? 1, ...values);
  const h = height - 2 * pad;
  const y = (v: number) => {
    const clamped = Math.min(Math.max(v, 0), top);
    return +(pad + h - (top > 0 ? (clamped / top) * h : 0)).toFixed(2);
  };
  if (values.length === 1) return `M0,${y(values[0])} L${width},${y(values[0])}`;
  const step = width / (values.length - 1);
  return values.map((v, i) => `${i === 0 ? "M" : "L"}${+(i * step).toFixed(2)},${y(v)}`).join(" ");
}

// Keeps the last `limit` samples of each series (a queue, a node), module-level so that
// they survive navigation within the app.
export class SampleStore {
  private series = new Map<string, Sample[]>();
  constructor(private limit = 60) {}
  add(name: string, s: Sample) {
    const list = this.series.get(name) ?? [];
    list.push(s);
    if (list.length > this.limit) list.splice(0, list.length - this.limit);
    this.series.set(name, list);
  }
  get(name: string): Sample[] { return this.series.get(name) ?? []; }
  values(name: string): number[] { return this.get(name).map((s) => s.value); }
}
