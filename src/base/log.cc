#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
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

// Now, as RFC 3339 UTC with milliseconds (what the text format's lines start with).
std::string Timestamp() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(ms % 1000));
  return text;
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
    j["time"] = Timestamp();
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
