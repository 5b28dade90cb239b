// The CodeMirror setup of the editor: YAML, line numbers, lint markers from the server's
// problems, and colours from CSS variables so that it follows the light or dark theme.
import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { EditorState, Prec, type Extension } from "@codemirror/state";
import { yaml } from "@codemirror/lang-yaml";
import { linter, lintGutter, type Diagnostic } from "@codemirror/lint";
import { HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";
import type { Problem } from "../api";
import { problemRange } from "./problems";

const theme = EditorView.theme({
  "&": { backgroundColor: "var(--panel)", color: "var(--text)", fontSize: "13px", height: "100%" },
  ".cm-content": { fontFamily: "var(--mono)", caretColor: "var(--text)" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.55" },
  ".cm-gutters": { backgroundColor: "var(--bg)", color: "var(--muted)", borderRight: "1px solid var(--border)" },
  ".cm-activeLine": { backgroundColor: "var(--ui-cm-active)" },
  ".cm-activeLineGutter": { backgroundColor: "var(--ui-cm-active)", color: "var(--text)" },
  "&.cm-focused .cm-cursor": { borderLeftColor: "var(--text)" },
  "&.cm-focused .cm-selectionBackground, .cm-selectionBackground, ::selection": { backgroundColor: "var(--ui-cm-selection) !important" },
  ".cm-tooltip": { backgroundColor: "var(--panel)", color: "var(--text)", border: "1px solid var(--border)" },
  ".cm-lintRange-error": { backgroundImage: "none", textDecoration: "underline wavy var(--failed)", textUnderlineOffset: "3px" },
  ".cm-panels": { backgroundColor: "var(--bg)", color: "var(--text)" },
  ".cm-searchMatch": { backgroundColor: "var(--ui-cm-match)" },
  ".cm-matchingBracket": { backgroundColor: "var(--ui-cm-match)" },
});

const highlight = HighlightStyle.define([
  { tag: [t.propertyName, t.definition(t.propertyName)], color: "var(--ui-syn-key)" },
  { tag: [t.string, t.special(t.string), t.content], color: "var(--ui-syn-string)" },
  { tag: [t.number, t.bool, t.null, t.atom], color: "var(--ui-syn-atom)" },
  { tag: [t.comment, t.lineComment, t.blockComment], color: "var(--ui-syn-comment)", fontStyle: "italic" },
  { tag: [t.keyword, t.operator, t.punctuation, t.separator, t.meta, t.typeName, t.labelName], color: "var(--ui-syn-punct)" },
]);

export function editorExtensions(opts: {
  validate: (doc: string) => Promise<Problem[]>;
  onChange: (doc: string) => void;
  onSubmit: () => void;
}): Extension[] {
  return [
    basicSetup,
    yaml(),
    theme,
    syntaxHighlighting(highlight),
    lintGutter(),
    linter(async (view) => {
      const problems = await opts.validate(view.state.doc.toString());
      return problems.map((p): Diagnostic => ({
        ...problemRange(view.state.doc, p), severity: "error",
        message: p.path ? `${p.path}: ${p.message}` : p.message,
      }));
    }, { delay: 300 }),
    Prec.highest(keymap.of([{ key: "Mod-Enter", run: () => { opts.onSubmit(); return true; } }])),
    EditorView.updateListener.of((u) => { if (u.docChanged) opts.onChange(u.state.doc.toString()); }),
    EditorView.contentAttributes.of({ "aria-label": "Job definition (YAML)" }),
  ];
}

export { EditorView, EditorState };
