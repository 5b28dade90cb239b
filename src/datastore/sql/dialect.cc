#include "datastore/sql/dialect.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace baton::sql {

std::string Placeholders(Dialect dialect, std::string_view sql) {
  std::string out(sql);
  if (dialect == Dialect::kPostgres) return out;
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '$' && out[i + 1] >= '0' && out[i + 1] <= '9') out[i] = '?';
  }
  return out;
}

std::string InList(Dialect dialect, std::string_view column, int n) {
  switch (dialect) {
    case Dialect::kSqlite:
      return fmt::format("{} IN (SELECT value FROM json_each(?{}))", column, n);
    case Dialect::kPostgres:
      return fmt::format("{} = ANY (${}::text[])", column, n);
  }
  return {};
}

std::string EncodeList(Dialect dialect, const std::vector<std::string_view>& items) {
  switch (dialect) {
    case Dialect::kSqlite: {
      nlohmann::json list = nlohmann::json::array();
      for (std::string_view item : items) list.push_back(std::string(item));
      return list.dump();
    }
    case Dialect::kPostgres: {
      ArrayLiteral list;
      for (std::string_view item : items) list.AddText(item);
      return list.Done();
    }
  }
  return {};
}

void ArrayLiteral::AddText(std::string_view v) {
  Separate();
  out_ += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') out_ += '\\';
    out_ += c;
  }
  out_ += '"';
}

void ArrayLiteral::AddRaw(std::string_view v) {
  Separate();
  out_ += v;
}

void ArrayLiteral::AddNull() {
  Separate();
  out_ += "NULL";
}

void ArrayLiteral::Separate() {
  if (!first_) out_ += ',';
  first_ = false;
}

std::string_view ForUpdate(Dialect dialect) {
  return dialect == Dialect::kPostgres ? " FOR UPDATE" : "";
}

std::string TagMatch(Dialect dialect, int n) {
  switch (dialect) {
    case Dialect::kSqlite:
      return fmt::format("EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE json_each.value = ?{})",
                         n);
    case Dialect::kPostgres:
      return fmt::format("jobs.tags ? ${}", n);  // jsonb: has this string element
  }
  return {};
}

std::string Contains(Dialect dialect, std::string_view column, int n) {
  switch (dialect) {
    case Dialect::kSqlite:
      return fmt::format("{} LIKE ?{} ESCAPE '\\'", column, n);
    case Dialect::kPostgres:
      return fmt::format("{} ILIKE ${}", column, n);  // backslash is LIKE's default escape
  }
  return {};
}

}  // namespace baton::sql
