export function EditorPage(_: { params: Record<string, string> }) { return <h1>New job</h1>; }
