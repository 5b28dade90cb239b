// The execution plan of a job, before it runs (parse, plan, then execute, as a database
// plans SQL): its top-level tasks in stages (a stage's tasks may run at once: what each
// needs is in earlier stages), each task's kind, needs and trigger rule, and which tasks
// its failure alone would skip; a parallel's, an each's and a sub-job's tasks planned
// inside it. `baton validate --plan` prints it (text, Graphviz dot or JSON); POST
// /jobs/plan answers its JSON for the UI's graph. Plain values, no I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/job.h"

namespace baton {

// The plan of a valid job (decoded without problems) as JSON:
//   {"name", "mode": "sequence"|"dag", "graph": bool, "stages": [[name...]...],
//    "tasks": [{"name", "kind", "stage", "needs": [...], "when"?: {need: template},
//               "triggerRule",
//               "failureSkips": [...] | "failureFailsTheJob": true,
//               "if"?, "retry"?, "tasks"?: [...] (a parallel's; with "graph": true and
//               "stages" when its tasks have needs, each planned as a job's are),
//               "each"?: {"list", "concurrency", "task"}, "subjob"?: {plan}}]}
// In a sequence that is no graph, a task's failure fails the job at once
// ("failureFailsTheJob"); in a graph it skips what can no longer run ("failureSkips",
// in the list's order, every edge counted as taken), and the rest goes on.
nlohmann::json PlanOf(const Job& job);

// The plan as text for a terminal, and as a Graphviz digraph (needs as edges, labelled
// with a trigger rule that is not the default; composites as clusters).
std::string PlanText(const nlohmann::json& plan);
std::string PlanDot(const nlohmann::json& plan);

}  // namespace baton
