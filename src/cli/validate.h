// `baton validate FILE...`: checks job files offline.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace baton::cli {

// Exit codes of the baton command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// What `--plan` prints of a valid job's plan (core/plan.h), instead of "FILE: ok".
enum class PlanFormat { kNone, kText, kDot, kJson };

// Validates each file ("-" is standard input) and prints each problem to `err` as
// `file:line:column: path: message`. Returns kExitOk when every file is valid,
// kExitFailure when a file has problems, kExitUsage when a file cannot be read.
// With a plan format, a valid file's execution plan is printed (a scheduled job's: of
// the job it fires).
int Validate(const std::vector<std::string>& files, std::ostream& out, std::ostream& err,
             PlanFormat plan = PlanFormat::kNone);

}  // namespace baton::cli
