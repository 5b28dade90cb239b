// The shell: navigation, the theme, global keys, and the view the URL names.
import { useRoute } from "./router";
import { JobsPage } from "./pages/JobsPage";
import { JobPage } from "./job/JobPage";
import { EditorPage } from "./pages/EditorPage";
import { ScheduledPage } from "./pages/ScheduledPage";
import { QueuesPage } from "./pages/QueuesPage";
import { NodesPage } from "./pages/NodesPage";

export function App() {
  const route = useRoute();
  const [top, id] = route.path;
  let view;
  switch (top) {
    case "jobs":
      view = id ? <JobPage id={id} params={route.params} /> : <JobsPage params={route.params} />;
      break;
    case "editor": view = <EditorPage params={route.params} />; break;
    case "scheduled": view = <ScheduledPage id={id} params={route.params} />; break;
    case "queues": view = <QueuesPage />; break;
    case "nodes": view = <NodesPage />; break;
    default: view = <JobsPage params={route.params} />;
  }
  return (
    <div class="shell">
      <header class="topbar">
        <a class="brand" href="#/jobs">Baton</a>
        <nav>
          <a href="#/jobs" aria-current={top === "jobs" ? "page" : undefined}>Jobs</a>
          <a href="#/scheduled" aria-current={top === "scheduled" ? "page" : undefined}>Scheduled</a>
          <a href="#/queues" aria-current={top === "queues" ? "page" : undefined}>Queues</a>
          <a href="#/nodes" aria-current={top === "nodes" ? "page" : undefined}>Nodes</a>
          <a class="button primary" href="#/editor">New job</a>
        </nav>
      </header>
      <main>{view}</main>
    </div>
  );
}
