// Global keyboard shortcuts. `KeySequencer` turns key presses into actions (pure, tested
// in keys.test.ts); `installKeys` listens on the document and hands each action to the
// newest handler that takes it (a page registers its own with `useKeys`).
//
//   /  focus the page's search     j / k  move the selection     Enter  open it
//   Esc  close a panel or dialog, or clear the search
//   g j  jobs   g s  scheduled   g q  queues   g n  nodes   n  new job   ?  this help
import { useLayoutEffect, useRef } from "preact/hooks";

export type KeyAction = "search" | "down" | "up" | "open" | "escape" | "help" | "new-job" |
  "go-jobs" | "go-scheduled" | "go-queues" | "go-nodes";

export const KEY_HELP: { keys: string; what: string }[] = [
  { keys: "/", what: "Focus the search" },
  { keys: "j / k", what: "Move the selection down / up in a list" },
  { keys: "Enter", what: "Open the selected row" },
  { keys: "Esc", what: "Close a panel or dialog, or clear the search" },
  { keys: "g j", what: "Go to jobs" },
  { keys: "g s", what: "Go to scheduled jobs" },
  { keys: "g q", what: "Go to queues" },
  { keys: "g n", what: "Go to nodes" },
  { keys: "n", what: "New job (the editor)" },
  { keys: "?", what: "Show this help" },
  { keys: "Ctrl/⌘ Enter", what: "Submit, in the editor" },
];

const SINGLE: Record<string, KeyAction> = {
  "/": "search", j: "down", k: "up", Enter: "open", Escape: "escape", "?": "help", n: "new-job",
};
const AFTER_G: Record<string, KeyAction> = { j: "go-jobs", s: "go-scheduled", q: "go-queues", n: "go-nodes" };

// Reads keys one at a time; `g` starts a two-key sequence that lasts `windowMs`.
export class KeySequencer {
  private gAt: number | null = null;
  constructor(private windowMs = 1500) {}
  feed(key: string, at: number): KeyAction | null {
    if (this.gAt !== null) {
      const fresh = at - this.gAt <= this.windowMs;
      this.gAt = null;
      if (fresh && AFTER_G[key]) return AFTER_G[key];
      if (fresh && key === "g") { this.gAt = at; return null; }
    }
    if (key === "g") { this.gAt = at; return null; }
    return SINGLE[key] ?? null;
  }
  get pending(): boolean { return this.gAt !== null; }
}

// Whether the key went to something the user types into (where only Esc is ours).
export function isTypingTarget(el: EventTarget | null): boolean {
  if (!el || !(el as Element).tagName) return false;
  const e = el as HTMLElement;
  const tag = e.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") {
    const type = (e as HTMLInputElement).type;
    return !["checkbox", "radio", "button", "submit", "reset"].includes(type);
  }
  return e.isContentEditable || !!e.closest?.(".cm-editor");
}

type Handlers = Partial<Record<KeyAction, (e: KeyboardEvent) => boolean | void>>;
const stack: { current: Handlers }[] = [];

// Registers a page's handlers while it is mounted; the newest registration is asked
// first. A handler returning false passes the action on to older ones.
export function useKeys(handlers: Handlers) {
  const ref = useRef(handlers);
  ref.current = handlers;
  useLayoutEffect(() => {
    const proxy = { get current() { return ref.current; } } as { current: Handlers };
    stack.push(proxy);
    return () => { const i = stack.indexOf(proxy); if (i >= 0) stack.splice(i, 1); };
  }, []);
}

export function dispatchKeyAction(action: KeyAction, e: KeyboardEvent): boolean {
  for (let i = stack.length - 1; i >= 0; i--) {
    const h = stack[i].current[action];
    if (h && h(e) !== false) return true;
  }
  return false;
}

export function installKeys(): () => void {
  const seq = new KeySequencer();
  const on = (e: KeyboardEvent) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
    const typing = isTypingTarget(e.target);
    if (typing && e.key !== "Escape") return;
    // Enter on a link or button does what that control does.
    if (e.key === "Enter" && (e.target as HTMLElement)?.closest?.("a,button,summary")) return;
    const action = seq.feed(e.key, performance.now());
    if (action && dispatchKeyAction(action, e)) e.preventDefault();
  };
  document.addEventListener("keydown", on);
  return () => document.removeEventListener("keydown", on);
}
