export function JobPage(props: { id: string; params: Record<string, string> }) { return <h1>Job {props.id}</h1>; }
