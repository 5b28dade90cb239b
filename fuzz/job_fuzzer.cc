// Fuzzes the job parser and validator: any bytes, as YAML and as JSON, must give either a
// job or a list of problems, never a crash, a leak or a hang. A job that parses must
// also survive the round trip through its JSON form.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/job_decode.h"
#include "core/job_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto format : {baton::DocumentFormat::kYaml, baton::DocumentFormat::kJson}) {
    baton::JobParseResult result = baton::ParseJob(text, format);
    if (!result.ok()) {
      (void)result.Message();
      continue;
    }
    std::string json = baton::ToJson(*result.job).dump();
    baton::JobParseResult again = baton::ParseJob(json, baton::DocumentFormat::kJson);
    if (!again.ok() || !(*again.job == *result.job)) __builtin_trap();
  }
  return 0;
}
