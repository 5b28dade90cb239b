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

// Validates each file ("-" is standard input) and prints each problem to `err` as
// `file:line:column: path: message`. Returns kExitOk when every file is valid,
// kExitFailure when a file has problems, kExitUsage when a file cannot be read.
int Validate(const std::vector<std::string>& files, std::ostream& out, std::ostream& err);

}  // namespace baton::cli
