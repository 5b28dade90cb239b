// The simulator: random jobs run through flow by a small in-memory shell, under
// duplicated, reordered and dropped events and crashes (reconciled with Frontier), and
// compared with a reference interpreter of the job format. Test code (used by
// flow_simulator_test and fuzz/flow_fuzzer.cc), not part of the engine.
//
// Thread-safety: none needed; each run owns all of its state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/names.h"

namespace baton::flow::sim {

// Where the random choices come from: a seeded generator, or a fuzzer's bytes (then, once
// they run out, a generator seeded from them).
class Choices {
 public:
  explicit Choices(std::uint64_t seed) : rng_(seed) {}
  Choices(const std::uint8_t* data, std::size_t size);
  // A number in [0, n).
  std::uint32_t Below(std::uint32_t n);
  // True with probability percent / 100.
  bool Percent(std::uint32_t percent) { return Below(100) < percent; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t at_ = 0;
  std::mt19937_64 rng_;
};

struct Result {
  bool ok = true;
  std::string failure;  // what broke, with the job and the history that led there
  int decisions = 0;
  int deliveries = 0;
  int rows = 0;
  int timers = 0;                          // retry backoffs and job deadlines that fired
  bool timed_out = false;                  // the job ended at its deadline
  JobState ending = JobState::kCompleted;  // how the top-level job ended
  bool restarted = false;                  // it was restarted (after a cancel or a failure)
};

// One random job (every composite kind nested in every other, to depth 4, with `if`,
// retries against random failures and timeouts, cancels, restarts, job timeouts, node
// deaths) run to its end and checked. `outcome_seed` picks the tasks' outcomes.
Result RunOne(Choices& choices, std::uint64_t outcome_seed);

}  // namespace baton::flow::sim
