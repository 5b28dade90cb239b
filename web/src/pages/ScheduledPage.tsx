export function ScheduledPage(_: { id?: string; params: Record<string, string> }) { return <h1>Scheduled jobs</h1>; }
