// The SQL dialects the shared datastore code speaks, and the few places they differ.
// Statements are written once, with PostgreSQL-style numbered parameters ($1, $2, ...);
// each hook below gives the dialect's spelling of one construct.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace baton::sql {

enum class Dialect { kSqlite, kPostgres };

// `sql` with its parameters in the dialect's form: SQLite's ?N for $N (SQLite would
// read $N as a named parameter, numbered by first appearance, not by N).
std::string Placeholders(Dialect dialect, std::string_view sql);

// `column` is one of the values of list parameter $n (bound to EncodeList's text).
std::string InList(Dialect dialect, std::string_view column, int n);

// The text of a list parameter: a JSON array for SQLite's json_each, an array literal
// for PostgreSQL's text[].
std::string EncodeList(Dialect dialect, const std::vector<std::string_view>& items);

// A PostgreSQL array literal, built an element at a time (EncodeList's form, with
// numbers and NULLs too): a parameter of `$n::text[]`, `$n::bigint[]`, ...
class ArrayLiteral {
 public:
  void AddText(std::string_view v);  // quoted, its quotes and backslashes escaped
  void AddRaw(std::string_view v);   // a number, as it is
  void AddNull();
  std::string Done() const { return "{" + out_ + "}"; }

 private:
  void Separate();
  std::string out_;
  bool first_ = true;
};

// The clause that locks the rows a SELECT reads until its transaction ends: FOR UPDATE
// on PostgreSQL; nothing on SQLite, whose one writer already runs alone.
std::string_view ForUpdate(Dialect dialect);

// Job `tags` (a JSON array) holds the text of parameter $n.
std::string TagMatch(Dialect dialect, int n);

// `column` contains the LIKE pattern $n (from ContainsPattern), whatever the case of
// its letters (SQLite: ASCII letters only).
std::string Contains(Dialect dialect, std::string_view column, int n);

}  // namespace baton::sql
