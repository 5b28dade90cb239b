// Locker: named, exclusive locks shared by every coordinator of a deployment, so that
// one of them — and only one — does a piece of work such as firing a cron tick.
//
// Contract (tests/conformance/locker_conformance.h):
// - TryAcquire returns a Lock when no one holds `name`, and FailedPrecondition when it is
//   held (by this process or another); it never blocks.
// - Acquire waits up to `timeout` for `name` to be free and then takes it;
//   DeadlineExceeded when it stays held that long. Waiters are not ordered.
// - A lock is held until its Lock object is destroyed (or its holder dies).
// - Different names are independent.
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "base/status.h"

namespace baton {

class Lock {
 public:
  virtual ~Lock() = default;  // releases
};

class Locker {
 public:
  virtual ~Locker() = default;
  virtual Result<std::unique_ptr<Lock>> TryAcquire(std::string_view name) = 0;
  virtual Result<std::unique_ptr<Lock>> Acquire(std::string_view name,
                                                std::chrono::milliseconds timeout) = 0;
};

// Locks within one process: right for standalone, where one coordinator runs.
std::unique_ptr<Locker> NewInProcessLocker();

}  // namespace baton
