#include "testing/simulator/simulator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>

namespace baton::flow::sim {
namespace {

// Random jobs from fixed seeds: every one must end as the reference interpreter says. A
// failure prints its seed (rerun it with BATON_SIM_SEED=n). The sanitised build runs seeds
// 1 to 3,000 (about 10 s with ASan and UBSan); flow_simulator_fast, the same test compiled
// optimised and unsanitised, runs 1 to 200,000 (tests/testing/simulator/CMakeLists.txt).
TEST(FlowSimulatorTest, RandomJobsEndAsTheReferenceInterpreterSays) {
  // BATON_SIM_JOBS runs more (or fewer), BATON_SIM_SECONDS runs for a time instead, and
  // BATON_SIM_FIRST from another seed: to hunt.
  std::uint64_t count = 3000;
  if (const char* n = std::getenv("BATON_SIM_JOBS")) count = std::stoull(n);
  std::optional<std::chrono::seconds> budget;
  if (const char* secs = std::getenv("BATON_SIM_SECONDS"))
    budget = std::chrono::seconds(std::stoi(secs));
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  std::uint64_t first = 1;
  if (const char* seed = std::getenv("BATON_SIM_FIRST")) first = std::stoull(seed);
  if (const char* seed = std::getenv("BATON_SIM_SEED")) {
    first = std::stoull(seed);
    count = 1;
  }
  // On a machine so loaded that the seeds would take over 4 minutes, it stops there (and
  // says so) rather than run into CTest's timeout.
  bool capped = false;
  auto more = [&](std::uint64_t seed) {
    std::chrono::steady_clock::duration spent = std::chrono::steady_clock::now() - start;
    if (budget) return spent < *budget;
    if (seed - first < count && spent > std::chrono::minutes(4)) capped = true;
    return seed - first < count && !capped;
  };
  int jobs = 0;
  long decisions = 0;
  long timers = 0;
  int timed_out = 0;
  std::map<JobState, int> endings;
  int restarted = 0;
  for (std::uint64_t seed = first; more(seed); ++seed) {
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
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  std::printf(
      "%d jobs (%d completed, %d failed of which %d timed out, %d cancelled; %d restarted), "
      "%ld decisions, %ld timers fired in %.1f s (%.0f jobs/s), %.1f s of CPU (%.0f jobs/s)\n",
      jobs, endings[JobState::kCompleted], endings[JobState::kFailed], timed_out,
      endings[JobState::kCancelled], restarted, decisions, timers, wall, jobs / wall, cpu,
      jobs / cpu);
  if (capped)
    std::printf("stopped at the 4-minute cap, %d seeds short\n", static_cast<int>(count) - jobs);
  EXPECT_GT(jobs, 0);
}

}  // namespace
}  // namespace baton::flow::sim
