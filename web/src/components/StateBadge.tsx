import type { ComponentChildren } from "preact";
// A job's or task's state as a coloured badge (colours from styles.css's state variables).
export function StateBadge({ state }: { state: string }) {
  return <span class={`ui-badge ui-state-${state.toLowerCase()}`}>{state}</span>;
}

// A small neutral badge ("sub-job", "scheduled", a tag).
export function Badge({ children, title, href }: { children: ComponentChildren; title?: string; href?: string }) {
  return href
    ? <a class="ui-badge ui-badge-link" href={href} title={title}>{children}</a>
    : <span class="ui-badge ui-badge-plain" title={title}>{children}</span>;
}
