// A parsed YAML or JSON document as a tree of nodes that remember where they came from,
// so that every problem found later can be reported at its line and column.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace baton {

// A 1-based position in the source text; 0 means unknown (a job built in code).
struct Mark {
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
  friend bool operator==(const Mark&, const Mark&) = default;
  friend void PrintTo(const Mark& m, std::ostream* os) { *os << m.line << ':' << m.column; }
};

// One problem in a document: where it is (line:column and the field path, such as
// "tasks[1].retry.limit") and what is wrong.
struct Diagnostic {
  Mark mark;
  std::string path;
  std::string message;
  // "3:7: tasks[1].retry.limit: must be between 1 and 10, got 12" (parts that are
  // unknown are left out).
  std::string ToString() const;
  friend bool operator==(const Diagnostic&, const Diagnostic&) = default;
};

struct MapEntry;

// A node of the document. Scalars keep their text and their resolved type: JSON's own
// types; for YAML, plain scalars resolve by the YAML 1.2 core schema and quoted ones are
// strings.
struct Node {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kSequence, kMap };

  Kind kind = Kind::kNull;
  std::string text;               // scalars: the value as written (JSON strings unescaped)
  std::vector<Node> items;        // kSequence
  std::vector<MapEntry> entries;  // kMap, in document order
  Mark mark;

  bool IsScalar() const { return kind != Kind::kSequence && kind != Kind::kMap; }
  // "null", "boolean", "integer", "number", "string", "list", "map"
  std::string_view KindName() const;
};

struct MapEntry {
  std::string key;
  Mark key_mark;
  Node value;
};

enum class DocumentFormat { kYaml, kJson };

// Guesses the format: JSON when the first non-blank character is '{' or '['.
DocumentFormat SniffFormat(std::string_view text);

// The offset of the first byte of `text` that is not part of valid UTF-8, or npos.
std::size_t InvalidUtf8At(std::string_view text);

// The offset of the first character of valid UTF-8 `text` that YAML does not allow in a
// stream (c-printable: controls other than tab, line feed and carriage return, DEL, C1
// controls other than NEL, U+FFFE and U+FFFF), or npos. yaml-cpp does not refuse them: a
// NUL makes it guess another encoding and hand back bytes that are not UTF-8.
std::size_t NonPrintableAt(std::string_view text);

// Nesting deeper than this is refused (no job needs it; it protects the stack).
inline constexpr int kMaxDocumentDepth = 100;
// Nodes a document may expand to (YAML aliases can multiply a small text).
inline constexpr std::size_t kMaxDocumentNodes = 200'000;
// Bytes of text (scalars and map keys) a document may expand to, by default. A YAML
// alias counts again each time it is used, so a small file that repeats one big string
// is refused as it is converted, before the copies are made (yaml-cpp itself only shares
// the aliased node). A text without aliases expands to at most its own size. The API
// sets its own limit (api.max_document_bytes); this is the default for it and for the CLI.
inline constexpr std::size_t kMaxDocumentBytes = 8 << 20;

struct ParsedDocument {
  std::optional<Node> root;         // set when the text parsed
  std::optional<Diagnostic> error;  // set otherwise: a syntax error with its position
  // The error is that the document expands to too many nodes or bytes (HTTP 413), not
  // that it is malformed.
  bool too_large = false;
};

// Parses YAML (yaml-cpp) or JSON (nlohmann-json). Never throws; syntax errors come back
// as a Diagnostic with line:column. A document expanding to more than `max_bytes` bytes
// of text, or kMaxDocumentNodes nodes, or nested deeper than kMaxDocumentDepth, is refused.
ParsedDocument ParseDocument(std::string_view text, DocumentFormat format,
                             std::size_t max_bytes = kMaxDocumentBytes);

// The message of a document refused for expanding to more than `max_bytes` bytes.
std::string DocumentTooLargeMessage(std::size_t max_bytes);

}  // namespace baton
