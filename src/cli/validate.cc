#include "cli/validate.h"

#include <fmt/format.h>

#include <algorithm>

#include "cli/job_file.h"
#include "core/job_decode.h"
#include "core/schedule.h"

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
    // A document with a top-level `schedule` is a scheduled job (POST /scheduled-jobs).
    DocumentFormat format = JobFileFormat(file, text);
    ParsedDocument doc = ParseDocument(text, format);
    bool scheduled = doc.root && doc.root->kind == Node::Kind::kMap &&
                     std::any_of(doc.root->entries.begin(), doc.root->entries.end(),
                                 [](const MapEntry& e) { return e.key == "schedule"; });
    std::vector<Diagnostic> problems =
        scheduled ? ParseScheduledJob(text, format).problems : ParseJob(text, format).problems;
    if (problems.empty()) {
      out << fmt::format("{}: ok\n", file);
      continue;
    }
    for (const Diagnostic& d : problems) err << file << ':' << d.ToString() << '\n';
    if (status == kExitOk) status = kExitFailure;
  }
  return status;
}

}  // namespace baton::cli
