#include "base/process.h"

#include <unistd.h>

#include <fstream>

namespace baton {

std::int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  long page = sysconf(_SC_PAGESIZE);
  return resident * (page > 0 ? page : 4096);
}

}  // namespace baton
