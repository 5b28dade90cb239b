export function JobsPage(_: { params: Record<string, string> }) { return <h1>Jobs</h1>; }
