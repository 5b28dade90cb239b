#include "testing/simulator/simulator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>

namespace baton::flow::sim {
namespace {

// Random jobs from fixed seeds for a few seconds: every one must end as the reference
// interpreter says. A failure prints its seed (rerun it with BATON_SIM_SEED=n).
TEST(FlowSimulatorTest, RandomJobsEndAsTheReferenceInterpreterSays) {
  // BATON_SIM_SECONDS runs longer (and BATON_SIM_FIRST from another seed) to hunt.
  auto budget = std::chrono::seconds(3);
  if (const char* secs = std::getenv("BATON_SIM_SECONDS"))
    budget = std::chrono::seconds(std::stoi(secs));
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t first = 1;
  if (const char* seed = std::getenv("BATON_SIM_FIRST")) first = std::stoull(seed);
  if (const char* seed = std::getenv("BATON_SIM_SEED")) first = std::stoull(seed);
  int jobs = 0;
  long decisions = 0;
  long timers = 0;
  int timed_out = 0;
  std::map<JobState, int> endings;
  int restarted = 0;
  for (std::uint64_t seed = first; std::chrono::steady_clock::now() - start < budget; ++seed) {
    Choices choices(seed);
    Result r = RunOne(choices, seed * 7919);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure;
    ++jobs;
    decisions += r.decisions;
    timers += r.timers;
    timed_out += r.timed_out ? 1 : 0;
    ++endings[r.ending];
    restarted += r.restarted ? 1 : 0;
    if (std::getenv("BATON_SIM_VERBOSE"))
      std::printf("seed %llu: %d decisions, %d deliveries, %d rows\n",
                  static_cast<unsigned long long>(seed), r.decisions, r.deliveries, r.rows);
    if (std::getenv("BATON_SIM_SEED")) break;
  }
  std::printf(
      "%d jobs (%d completed, %d failed of which %d timed out, %d cancelled; %d restarted), "
      "%ld decisions, %ld timers fired in %lld ms\n",
      jobs, endings[JobState::kCompleted], endings[JobState::kFailed], timed_out,
      endings[JobState::kCancelled], restarted, decisions, timers,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - start)
                                 .count()));
  EXPECT_GT(jobs, 100);
}

}  // namespace
}  // namespace baton::flow::sim
