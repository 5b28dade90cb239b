// Typed durations (Go syntax: "500ms", "1m30s") and memory sizes (Docker syntax: "64m",
// "1g", also "64Mi"), parsed from job files and formatted back canonically.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baton {

// Durations are kept to the millisecond; finer inputs ("1500us") round up.
using Duration = std::chrono::milliseconds;

// Parses a non-negative Go-style duration: a sequence of decimal numbers, each with a unit
// (ns, us, µs, ms, s, m, h), e.g. "300ms", "1.5h", "2h45m". "0" alone is zero.
Result<Duration> ParseDuration(std::string_view text);

// Formats a duration the way Go does: "0s", "500ms", "1.5s", "1m30s", "2h0m0s".
std::string FormatDuration(Duration d);

// Parses a memory size: a number with an optional binary unit b, k, m, g, t (Docker,
// case-insensitive, optionally followed by "b", as in "64mb") or Ki, Mi, Gi, Ti
// (Kubernetes). A plain number is bytes.
Result<std::int64_t> ParseMemory(std::string_view text);

// Formats bytes with the largest unit that divides them: "64m", "1g", "1536k", "100".
std::string FormatMemory(std::int64_t bytes);

}  // namespace baton
