// Helpers for tests of GET /events' streams (coordinator/events.h).
#pragma once

#include <string>

#include "coordinator/events.h"
#include "testing/wait_for.h"

namespace baton::testing {

// A job's change to `state` (a one-task job).
inline Change JobTo(const std::string& job, const std::string& state) {
  return {.kind = Change::Kind::kJob, .job_id = job, .state = state, .task_count = 1};
}

// Everything `stream` is given until `text` has come (or 5 s).
inline std::string TakeUntil(EventStream& stream, const std::string& text) {
  std::string got;
  WaitFor(
      [&] {
        got += stream.Take();
        return got.find(text) != std::string::npos;
      },
      std::chrono::seconds(5));
  return got;
}

}  // namespace baton::testing
