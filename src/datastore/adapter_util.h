// Helpers every datastore adapter needs: paging arithmetic, and keeping exceptions (from
// a modifier, or from JSON handling) from crossing the Datastore interface.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "core/records.h"
#include "datastore/datastore.h"

namespace baton::datastore_util {

inline constexpr int kMaxPageSize = 100;

// Calls an Update* modifier; an exception it throws becomes kInternal.
template <typename Record>
Status CallModifier(const std::function<Status(Record&)>& modify, Record& record) {
  try {
    return modify(record);
  } catch (const std::exception& e) {
    return Internal(fmt::format("update modifier threw: {}", e.what()));
  } catch (...) {
    return Internal("update modifier threw");
  }
}

// Runs `body` (returning Status or Result<T>), turning any exception into kInternal.
template <typename F>
auto NoThrow(F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Internal(fmt::format("datastore: {}", e.what()));
  } catch (...) {
    return Internal("datastore: unknown exception");
  }
}

struct PageSpec {
  int number;
  int size;
  std::int64_t offset;
};

// A task row's loop scope as stored: "{}" for the common empty one (no JSON work).
inline std::string ScopeText(const nlohmann::json& scope) {
  if (!scope.is_object() || scope.empty()) return "{}";
  return scope.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline Result<nlohmann::json> ParseScope(std::string_view text) {
  if (text.empty() || text == "{}") return nlohmann::json::object();
  auto scope = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!scope.is_object()) return Internal("not a JSON object");
  return scope;
}

// Page numbers from 1, sizes 1..kMaxPageSize.
inline PageSpec ClampPage(int page, int size) {
  PageSpec spec;
  spec.number = std::max(page, 1);
  spec.size = std::clamp(size, 1, kMaxPageSize);
  spec.offset = static_cast<std::int64_t>(spec.number - 1) * spec.size;
  return spec;
}

template <typename T>
Page<T> MakePage(const PageSpec& spec, std::int64_t total, std::vector<T> items) {
  Page<T> page;
  page.items = std::move(items);
  page.number = spec.number;
  page.size = spec.size;
  page.total_items = total;
  page.total_pages = static_cast<int>((total + spec.size - 1) / spec.size);
  return page;
}

// Job search (JobQuery::q): the words of a query, split on blanks.
inline std::vector<std::string_view> SplitWords(std::string_view text) { return SearchWords(text); }

// `word` as a LIKE pattern matching it anywhere, with LIKE's wildcards escaped.
inline std::string ContainsPattern(std::string_view word) {
  std::string pattern = "%";
  for (char c : word) {
    if (c == '%' || c == '_' || c == '\\') pattern += '\\';
    pattern += c;
  }
  pattern += '%';
  return pattern;
}

// For matching a word against a state name, whatever its case.
inline std::string AsciiUpper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

}  // namespace baton::datastore_util
