#include "cli/validate.h"

#include <fmt/format.h>

#include "cli/job_file.h"
#include "core/job_decode.h"

namespace baton::cli {

int Validate(const std::vector<std::string>& files, std::ostream& out, std::ostream& err) {
  int status = kExitOk;
  for (const std::string& file : files) {
    std::string text;
    std::string error;
    if (!ReadJobFile(file, text, error)) {
      err << fmt::format("{}: cannot read: {}\n", file, error);
      status = kExitUsage;
      continue;
    }
    JobParseResult result = ParseJob(text, JobFileFormat(file, text));
    if (result.ok()) {
      out << fmt::format("{}: ok\n", file);
      continue;
    }
    for (const Diagnostic& d : result.problems) err << file << ':' << d.ToString() << '\n';
    if (status == kExitOk) status = kExitFailure;
  }
  return status;
}

}  // namespace baton::cli
