export function QueuesPage() { return <h1>Queues</h1>; }
