// WaitFor: polls a predicate until it holds or a deadline passes, for tests of code that
// finishes on another thread. Use it instead of bare sleeps.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace baton::testing {

inline bool WaitFor(const std::function<bool()>& predicate,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= deadline) return predicate();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace baton::testing
