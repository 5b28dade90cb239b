// A modal confirmation: focus moves into it, Esc or "Cancel" closes it, and focus goes
// back where it was.
import type { ComponentChildren } from "preact";
import { useLayoutEffect, useRef } from "preact/hooks";
import { useKeys } from "../keys";
import { useFocusTrap } from "./focusTrap";

export function ConfirmDialog({ title, children, confirmLabel, danger, onConfirm, onClose }: {
  title: string; children?: ComponentChildren; confirmLabel: string; danger?: boolean;
  onConfirm: () => void; onClose: () => void;
}) {
  const ref = useRef<HTMLButtonElement>(null);
  const box = useRef<HTMLDivElement>(null);
  useFocusTrap(box);
  // Layout effects run in the same task as the render that shows the dialog, so Esc, Tab
  // and the focus work from the first frame, even on a starved machine where plain
  // effects wait for the next animation frame.
  useLayoutEffect(() => {
    const before = document.activeElement as HTMLElement | null;
    ref.current?.focus();
    return () => before?.focus?.();
  }, []);
  useKeys({ escape: () => { onClose(); } });
  return (
    <div class="ui-overlay" onClick={(e) => { if (e.target === e.currentTarget) onClose(); }}>
      <div class="ui-dialog" role="dialog" aria-modal="true" aria-labelledby="ui-dialog-title" ref={box}>
        <h2 id="ui-dialog-title">{title}</h2>
        <div class="ui-dialog-body">{children}</div>
        <div class="ui-dialog-actions">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="button" ref={ref} class={danger ? "ui-danger" : "primary"} onClick={onConfirm}>{confirmLabel}</button>
        </div>
      </div>
    </div>
  );
}
