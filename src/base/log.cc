#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>

namespace baton::log {
namespace {

std::atomic<Format> g_format{Format::kText};

std::shared_ptr<spdlog::logger> Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_logger_mt("baton");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
    return l;
  }();
  return logger;
}

spdlog::level::level_enum ToSpd(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

}  // namespace

void Configure(Level level, Format format) {
  g_format = format;
  auto logger = Logger();
  logger->set_level(ToSpd(level));
  if (format == Format::kJson) {
    logger->set_pattern("%v");
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
  }
}

void Write(Level level, std::string_view message, Fields fields) {
  auto logger = Logger();
  auto spd_level = ToSpd(level);
  if (!logger->should_log(spd_level)) return;
  std::string line;
  if (g_format == Format::kJson) {
    nlohmann::json j;
    j["level"] = std::string(spdlog::level::to_string_view(spd_level).data());
    j["msg"] = message;
    for (const auto& [k, v] : fields) j[std::string(k)] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line.assign(message);
    for (const auto& [k, v] : fields) {
      line += ' ';
      line += k;
      line += '=';
      bool quote = v.find_first_of(" \t\"") != std::string_view::npos || v.empty();
      if (quote) line += '"';
      line += v;
      if (quote) line += '"';
    }
  }
  logger->log(spd_level, "{}", line);
}

}  // namespace baton::log
