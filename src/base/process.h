// Facts about this process, read from /proc.
#pragma once

#include <cstdint>

namespace baton {

// The resident set size of this process in bytes (/proc/self/statm); 0 when unreadable.
std::int64_t ResidentBytes();

}  // namespace baton
