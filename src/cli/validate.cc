#include "cli/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "cli/job_file.h"
#include "core/job_decode.h"
#include "core/plan.h"
#include "core/schedule.h"

namespace baton::cli {

namespace {

void PrintPlan(const Job& job, PlanFormat format, std::ostream& out) {
  nlohmann::json plan = PlanOf(job);
  switch (format) {
    case PlanFormat::kNone:
      return;
    case PlanFormat::kText:
      out << PlanText(plan);
      return;
    case PlanFormat::kDot:
      out << PlanDot(plan);
      return;
    case PlanFormat::kJson:
      out << plan.dump(2) << '\n';
      return;
  }
}

}  // namespace

int Validate(const std::vector<std::string>& files, std::ostream& out, std::ostream& err,
             PlanFormat plan) {
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
    std::optional<Job> job;
    std::vector<Diagnostic> problems;
    if (scheduled) {
      ScheduledJobParseResult parsed = ParseScheduledJob(text, format);
      job = std::move(parsed.job);
      problems = std::move(parsed.problems);
    } else {
      JobParseResult parsed = ParseJob(text, format);
      job = std::move(parsed.job);
      problems = std::move(parsed.problems);
    }
    if (problems.empty()) {
      if (plan == PlanFormat::kNone || !job) {
        out << fmt::format("{}: ok\n", file);
      } else {
        PrintPlan(*job, plan, out);
      }
      continue;
    }
    for (const Diagnostic& d : problems) err << file << ':' << d.ToString() << '\n';
    if (status == kExitOk) status = kExitFailure;
  }
  return status;
}

}  // namespace baton::cli
