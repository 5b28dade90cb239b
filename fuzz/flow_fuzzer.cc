// Random jobs and event histories from fuzzer bytes, run through flow by the simulator
// and checked against its reference interpreter (tests/testing/simulator/).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "testing/simulator/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  baton::flow::sim::Choices choices(data, size);
  std::uint64_t outcome_seed = size > 0 ? data[0] : 0;
  baton::flow::sim::Result r = baton::flow::sim::RunOne(choices, outcome_seed);
  if (!r.ok) {
    std::fprintf(stderr, "%s\n", r.failure.c_str());
    std::abort();
  }
  return 0;
}
