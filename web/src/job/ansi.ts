// ANSI colours in task logs: SGR (colours 30–37, 90–97, 40–47, 100–107, 256-colour and
// true-colour `38;5;n`/`38;2;r;g;b` and their backgrounds, bold, dim, italic, underline,
// reset) become styled segments; every other escape sequence is stripped. The view builds
// text nodes from the segments: log text is never parsed as HTML.

export interface Style {
  fg?: string;           // "c1" (a palette index 0–15, themed by CSS) or "#rrggbb"
  bg?: string;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
}

export interface Segment { text: string; style: Style }

// The xterm 256-colour palette above the 16 themed ones: a 6×6×6 cube, then 24 greys.
export function color256(n: number): string {
  if (n < 16) return `c${n}`;
  if (n < 232) {
    const i = n - 16;
    const v = (c: number) => (c === 0 ? 0 : 55 + c * 40);
    return hex(v(Math.floor(i / 36)), v(Math.floor(i / 6) % 6), v(i % 6));
  }
  const g = 8 + (n - 232) * 10;
  return hex(g, g, g);
}

function hex(r: number, g: number, b: number) {
  return `#${[r, g, b].map((x) => Math.max(0, Math.min(255, x)).toString(16).padStart(2, "0")).join("")}`;
}

// Applies one SGR parameter list to a style.
export function applySgr(style: Style, params: number[]): Style {
  const s: Style = { ...style };
  if (params.length === 0) params = [0];
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    if (p === 0) { for (const k of Object.keys(s)) delete (s as Record<string, unknown>)[k]; }
    else if (p === 1) s.bold = true;
    else if (p === 2) s.dim = true;
    else if (p === 3) s.italic = true;
    else if (p === 4) s.underline = true;
    else if (p === 22) { delete s.bold; delete s.dim; }
    else if (p === 23) delete s.italic;
    else if (p === 24) delete s.underline;
    else if (p >= 30 && p <= 37) s.fg = `c${p - 30}`;
    else if (p >= 90 && p <= 97) s.fg = `c${p - 90 + 8}`;
    else if (p >= 40 && p <= 47) s.bg = `c${p - 40}`;
    else if (p >= 100 && p <= 107) s.bg = `c${p - 100 + 8}`;
    else if (p === 39) delete s.fg;
    else if (p === 49) delete s.bg;
    else if (p === 38 || p === 48) {
      const key = p === 38 ? "fg" : "bg";
      if (params[i + 1] === 5 && params[i + 2] !== undefined) { s[key] = color256(params[i + 2]); i += 2; }
      else if (params[i + 1] === 2 && params[i + 4] !== undefined) {
        s[key] = hex(params[i + 2], params[i + 3], params[i + 4]); i += 4;
      } else break; // malformed: ignore the rest
    }
  }
  return s;
}

// CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), charset designations (ESC ( B),
// other two-byte escapes, and
// stray control characters other than tab and newline.
const ESCAPES = /\x1b\[([0-9;:?<=>]*)([ -\/]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()*+#][0-9A-Za-z@]|\x1b[@-Z\\-_=>78]|\x1b|[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f]/g;

// Splits `text` into styled segments, starting from `state` (the style the previous
// chunk ended with); returns the segments and the style at the end.
export function parseAnsi(text: string, state: Style = {}): { segments: Segment[]; state: Style } {
  const segments: Segment[] = [];
  let style = state;
  let last = 0;
  const push = (t: string) => {
    if (!t) return;
    const prev = segments[segments.length - 1];
    if (prev && prev.style === style) prev.text += t; else segments.push({ text: t, style });
  };
  ESCAPES.lastIndex = 0;
  for (let m = ESCAPES.exec(text); m; m = ESCAPES.exec(text)) {
    push(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[3] === "m" && !m[2]) {
      const params = m[1] === "" ? [] : m[1].split(/[;:]/).map((x) => (x === "" ? 0 : Number(x)));
      if (params.every((x) => Number.isFinite(x))) style = applySgr(style, params);
    }
  }
  push(text.slice(last));
  return { segments, state: style };
}
