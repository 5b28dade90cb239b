// What workers report (core/messages.h), and what an executor reports (StartReport), as
// the flow events that decide it; what a failed decision answers a worker's message
// with. Pure functions: thread-safe.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "coordinator/executors/executor.h"
#include "core/messages.h"
#include "flow/types.h"

namespace baton {

// One worker message: the task it is about, its job (empty when the message does not name
// it), the flow event that decides it, and what to log when deciding it fails for good.
struct WorkerEvent {
  std::string task_id;
  std::string job_id;
  flow::Event event;
  const char* failure = "";
};

WorkerEvent FromWorker(const TaskStarted& message);
WorkerEvent FromWorker(const TaskFinished& message);
WorkerEvent FromWorker(const TaskProgress& message);

// An executor's report: with a durable broker, one Published per job of the rows it
// confirmed (decided together: the job's rows are read once); one PublishRefused per
// row it refused.
std::vector<flow::Event> FromExecutor(StartReport report, bool durable_broker);

// Errors worth delivering the event again for (Unavailable, DeadlineExceeded).
bool MayPass(const Status& s);

// The answer to the message given its decision's status: the error when delivering the
// message again may pass; else Ok (NotFound and FailedPrecondition quietly, other errors
// logged here), and the message is done with.
Status Handled(const Status& s, const WorkerEvent& event);

}  // namespace baton
