export function NodesPage() { return <h1>Nodes</h1>; }
