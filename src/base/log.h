// The logging facade. Everything logs through these functions; only log.cc knows spdlog.
// Messages are sentences; context goes in structured fields (job_id, task_id, node), which
// the text format prints as key=value and the JSON format as members. Never log secrets.
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>

namespace baton::log {

enum class Level { kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

using Field = std::pair<std::string_view, std::string_view>;
using Fields = std::initializer_list<Field>;

// Sets the minimum level and the format (default: info, text, to stderr).
void Configure(Level level, Format format);

void Write(Level level, std::string_view message, Fields fields = {});

inline void Debug(std::string_view message, Fields fields = {}) {
  Write(Level::kDebug, message, fields);
}
inline void Info(std::string_view message, Fields fields = {}) {
  Write(Level::kInfo, message, fields);
}
inline void Warn(std::string_view message, Fields fields = {}) {
  Write(Level::kWarn, message, fields);
}
inline void Error(std::string_view message, Fields fields = {}) {
  Write(Level::kError, message, fields);
}

}  // namespace baton::log
