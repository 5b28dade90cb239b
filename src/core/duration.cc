#include "core/duration.h"

#include <cmath>
#include <cstdio>

namespace baton {
namespace {

constexpr double kMaxNanos = 1e18;  // ~31 years: more than any timeout needs

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads a decimal number ("12", "1.5", ".5") at text[i]; returns false if none.
bool ReadNumber(std::string_view text, std::size_t& i, double& out) {
  std::size_t start = i;
  double value = 0;
  bool digits = false;
  while (i < text.size() && IsDigit(text[i])) {
    value = value * 10 + (text[i] - '0');
    digits = true;
    ++i;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    double scale = 0.1;
    while (i < text.size() && IsDigit(text[i])) {
      value += (text[i] - '0') * scale;
      scale /= 10;
      digits = true;
      ++i;
    }
  }
  if (!digits) {
    i = start;
    return false;
  }
  out = value;
  return true;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";  // piecewise: g++ 12 misreports "\"" + string (-Wrestrict)
  out += s;
  out += '"';
  return out;
}

}  // namespace

Result<Duration> ParseDuration(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("invalid duration " + Quote(text) + ": " + std::string(why) +
                           " (use e.g. 500ms, 30s, 1m30s, 2h)");
  };
  if (text.empty()) return bad("empty");
  if (text == "0") return Duration::zero();
  std::size_t i = 0;
  if (text[0] == '-') return bad("must not be negative");
  if (text[0] == '+') ++i;
  double nanos = 0;
  bool any = false;
  while (i < text.size()) {
    double number = 0;
    if (!ReadNumber(text, i, number)) return bad("expected a number");
    std::size_t unit_start = i;
    while (i < text.size() && !IsDigit(text[i]) && text[i] != '.') ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    double scale = 0;
    if (unit == "ns") {
      scale = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {
      scale = 1e3;
    } else if (unit == "ms") {
      scale = 1e6;
    } else if (unit == "s") {
      scale = 1e9;
    } else if (unit == "m") {
      scale = 60e9;
    } else if (unit == "h") {
      scale = 3600e9;
    } else if (unit.empty()) {
      return bad("missing unit");
    } else {
      return bad("unknown unit " + Quote(unit));
    }
    nanos += number * scale;
    if (nanos > kMaxNanos) return bad("too large");
    any = true;
  }
  if (!any) return bad("expected a number");
  return Duration(static_cast<std::int64_t>(std::ceil(nanos / 1e6)));
}

std::string FormatDuration(Duration d) {
  std::int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms < 1000) return out + std::to_string(ms) + "ms";
  std::int64_t hours = ms / 3'600'000;
  std::int64_t minutes = ms / 60'000 % 60;
  std::int64_t seconds = ms / 1000 % 60;
  std::int64_t millis = ms % 1000;
  if (hours > 0) out += std::to_string(hours) + "h";
  if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
  out += std::to_string(seconds);
  if (millis > 0) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(millis));
    std::string f = frac;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "s";
}

Result<std::int64_t> ParseMemory(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("invalid memory size " + Quote(text) + ": " + std::string(why) +
                           " (use e.g. 512k, 64m, 1g, 64Mi)");
  };
  std::size_t i = 0;
  double number = 0;
  if (!ReadNumber(text, i, number)) return bad("expected a number");
  std::string unit;
  for (char c : text.substr(i)) {
    if (c == ' ') continue;
    unit += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  // Accept "k", "kb", "ki", "kib" alike: all binary, as Docker and Kubernetes mean them.
  if (unit.size() > 1 && unit.back() == 'b') unit.pop_back();
  if (unit.size() == 2 && unit.back() == 'i') unit.pop_back();
  double scale = 0;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "k") {
    scale = 1024.0;
  } else if (unit == "m") {
    scale = 1024.0 * 1024;
  } else if (unit == "g") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "t") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return bad("unknown unit " + Quote(text.substr(i)));
  }
  double bytes = number * scale;
  if (bytes > 9e18) return bad("too large");
  if (bytes < 1) return bad("must be at least one byte");
  return static_cast<std::int64_t>(bytes);
}

std::string FormatMemory(std::int64_t bytes) {
  constexpr struct {
    std::int64_t size;
    const char* unit;
  } kUnits[] = {{1LL << 40, "t"}, {1LL << 30, "g"}, {1LL << 20, "m"}, {1LL << 10, "k"}};
  for (const auto& u : kUnits) {
    if (bytes >= u.size && bytes % u.size == 0) return std::to_string(bytes / u.size) + u.unit;
  }
  return std::to_string(bytes);
}

}  // namespace baton
