#include "core/document.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace baton {
namespace {

// ---------------------------------------------------------------------------- YAML

bool AllOf(std::string_view s, bool (*pred)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}
bool IsDec(char c) { return c >= '0' && c <= '9'; }
bool IsOct(char c) { return c >= '0' && c <= '7'; }
bool IsHex(char c) { return IsDec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool IsCoreFloat(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  std::size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && IsDec(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDec(s[i])) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!AllOf(s.substr(i), IsDec)) return false;
    i = s.size();
  }
  return i == s.size();
}

// Resolves a plain YAML scalar by the YAML 1.2 core schema.
Node::Kind ResolvePlain(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Node::Kind::kNull;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    return Node::Kind::kBool;
  }
  char c = s[0];
  if (!(c == '-' || c == '+' || c == '.' || IsDec(c))) return Node::Kind::kString;
  std::string_view digits = (c == '-' || c == '+') ? s.substr(1) : s;
  if (AllOf(digits, IsDec) || (s.starts_with("0o") && AllOf(s.substr(2), IsOct)) ||
      (s.starts_with("0x") && AllOf(s.substr(2), IsHex))) {
    return Node::Kind::kInt;
  }
  if (IsCoreFloat(s)) return Node::Kind::kFloat;
  for (std::string_view special : {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
                                   "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"}) {
    if (s == special) return Node::Kind::kFloat;
  }
  return Node::Kind::kString;
}

Mark ToMark(const YAML::Mark& m) {
  if (m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

class YamlConverter {
 public:
  // Returns false (with error_ set) when the document is too deep or has a key that is
  // not a scalar. Its size was bounded by YamlSizer before it was built.
  bool Convert(const YAML::Node& in, Node& out, int depth) {
    if (depth > kMaxDocumentDepth) {
      error_ = Diagnostic{ToMark(in.Mark()), "", "document nested too deeply"};
      return false;
    }
    out.mark = ToMark(in.Mark());
    switch (in.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out.kind = Node::Kind::kNull;
        return true;
      case YAML::NodeType::Scalar: {
        out.text = in.Scalar();
        const std::string& tag = in.Tag();
        if (tag == "!" || tag == "tag:yaml.org,2002:str") {
          out.kind = Node::Kind::kString;
        } else {
          out.kind = ResolvePlain(out.text);
        }
        return true;
      }
      case YAML::NodeType::Sequence:
        out.kind = Node::Kind::kSequence;
        out.items.reserve(in.size());
        for (const auto& child : in) {
          out.items.emplace_back();
          if (!Convert(child, out.items.back(), depth + 1)) return false;
        }
        return true;
      case YAML::NodeType::Map:
        out.kind = Node::Kind::kMap;
        for (const auto& kv : in) {
          MapEntry entry;
          entry.key_mark = ToMark(kv.first.Mark());
          if (!kv.first.IsScalar()) {
            error_ = Diagnostic{entry.key_mark, "", "map keys must be plain strings"};
            return false;
          }
          entry.key = kv.first.Scalar();
          if (!Convert(kv.second, entry.value, depth + 1)) return false;
          out.entries.push_back(std::move(entry));
        }
        return true;
    }
    return true;
  }

  std::optional<Diagnostic> error_;
};

// A first pass over the YAML events, building nothing, that stops at the first event past
// a limit: the nodes and bytes the document expands to (an alias counts the whole value it
// repeats) and its depth, counted as Convert would count them (a map key's bytes, not a
// node). yaml-cpp's Load builds every node before Convert could count them (3 s for the
// million nodes a 4 MiB body can hold); this pass refuses such a document after reading
// up to the limit (0.3 s), so Convert counts nothing itself.
class YamlSizer final : public YAML::EventHandler {
 public:
  struct Stop {
    Diagnostic diagnostic;
    bool too_large;
  };

  explicit YamlSizer(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor, 0); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    TakeSlot();
    auto it = anchors_.find(anchor);
    Size size = it == anchors_.end() ? Size{1, 0} : it->second;
    Add(size, mark);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    Leaf(mark, anchor, value.size());
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor, /*map=*/false);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor, /*map=*/true);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Size {
    std::size_t nodes = 0;
    std::size_t bytes = 0;
  };
  struct Frame {
    YAML::anchor_t anchor;
    Size size;
    bool map = false;
    bool key_next = false;  // in a map: the next event is a key
  };

  // Whether the event that starts now is a map key (a map's events alternate key, value).
  bool TakeSlot() {
    if (frames_.empty() || !frames_.back().map) return false;
    bool key = frames_.back().key_next;
    frames_.back().key_next = !key;
    return key;
  }

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor, std::size_t bytes) {
    Size size{TakeSlot() ? 0u : 1u, bytes};
    if (anchor != YAML::NullAnchor) anchors_[anchor] = size;
    Add(size, mark);
  }

  void Open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map) {
    TakeSlot();  // a collection as a key is refused by Convert; counted as a value here
    if (frames_.size() >= static_cast<std::size_t>(kMaxDocumentDepth)) {
      throw Stop{Diagnostic{ToMark(mark), "", "document nested too deeply"}, false};
    }
    // Its own node goes into its parent's size with the rest of it, at Close.
    Count(Size{1, 0}, mark);
    frames_.push_back(Frame{anchor, Size{1, 0}, map, /*key_next=*/map});
  }

  void Close() {
    if (frames_.empty()) return;
    Frame done = frames_.back();
    frames_.pop_back();
    if (done.anchor != YAML::NullAnchor) anchors_[done.anchor] = done.size;
    if (!frames_.empty()) {
      frames_.back().size.nodes += done.size.nodes;
      frames_.back().size.bytes += done.size.bytes;
    }
  }

  // A value (all it expands to) in the document, and in the collection it is in (whose
  // size an alias of that collection repeats).
  void Add(Size size, const YAML::Mark& mark) {
    Count(size, mark);
    if (!frames_.empty()) {
      frames_.back().size.nodes += size.nodes;
      frames_.back().size.bytes += size.bytes;
    }
  }

  void Count(Size size, const YAML::Mark& mark) {
    nodes_ += size.nodes;
    bytes_ += size.bytes;
    if (nodes_ > kMaxDocumentNodes) {
      throw Stop{Diagnostic{ToMark(mark), "", "document too large (too many nodes)"}, true};
    }
    if (bytes_ > max_bytes_) {
      throw Stop{Diagnostic{ToMark(mark), "", DocumentTooLargeMessage(max_bytes_)}, true};
    }
  }

  std::size_t max_bytes_;
  std::size_t nodes_ = 0;
  std::size_t bytes_ = 0;
  std::vector<Frame> frames_;
  std::unordered_map<YAML::anchor_t, Size> anchors_;
};

ParsedDocument ParseYaml(std::string_view text, std::size_t max_bytes) {
  ParsedDocument result;
  try {
    {
      std::istringstream in{std::string(text)};
      YAML::Parser parser(in);
      YamlSizer sizer(max_bytes);
      try {
        parser.HandleNextDocument(sizer);
      } catch (const YamlSizer::Stop& stop) {
        result.error = stop.diagnostic;
        result.too_large = stop.too_large;
        return result;
      }
    }
    YAML::Node doc = YAML::Load(std::string(text));
    YamlConverter converter;
    Node root;
    if (!converter.Convert(doc, root, 0)) {
      result.error = converter.error_;
      return result;
    }
    if (!root.mark.known()) root.mark = {1, 1};
    result.root = std::move(root);
  } catch (const YAML::Exception& e) {
    result.error = Diagnostic{ToMark(e.mark), "", "YAML syntax error: " + e.msg};
  } catch (const std::exception& e) {
    result.error = Diagnostic{{}, "", std::string("YAML syntax error: ") + e.what()};
  }
  return result;
}

// ---------------------------------------------------------------------------- JSON

// A char iterator that records how far nlohmann's lexer has read, so SAX events can be
// given the position of their token.
class CountingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator() = default;
  CountingIterator(const char* p, const char* base, std::size_t* consumed)
      : p_(p), base_(base), consumed_(consumed) {}
  reference operator*() const { return *p_; }
  CountingIterator& operator++() {
    ++p_;
    if (consumed_ != nullptr) *consumed_ = static_cast<std::size_t>(p_ - base_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  friend bool operator==(const CountingIterator& a, const CountingIterator& b) {
    return a.p_ == b.p_;
  }

 private:
  const char* p_ = nullptr;
  const char* base_ = nullptr;
  std::size_t* consumed_ = nullptr;
};

// Maps byte offsets to 1-based line:column.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text) {
    starts_.push_back(0);
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') starts_.push_back(i + 1);
    }
  }
  Mark At(std::size_t offset) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    auto line = static_cast<int>(it - starts_.begin());
    return {line, static_cast<int>(offset - starts_[line - 1]) + 1};
  }

 private:
  std::vector<std::size_t> starts_;
};

class JsonBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  JsonBuilder(std::string_view text, const std::size_t& consumed, std::size_t max_bytes)
      : text_(text), consumed_(consumed), lines_(text), max_bytes_(max_bytes) {}

  bool null() override { return Scalar(Node::Kind::kNull, ""); }
  bool boolean(bool v) override { return Scalar(Node::Kind::kBool, v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override {
    return Scalar(Node::Kind::kInt, std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return Scalar(Node::Kind::kInt, std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& s) override {
    return Scalar(Node::Kind::kFloat, s);
  }
  bool string(string_t& s) override { return Scalar(Node::Kind::kString, std::move(s)); }
  bool binary(binary_t&) override { return Scalar(Node::Kind::kString, ""); }

  bool start_object(std::size_t) override { return Open(Node::Kind::kMap); }
  bool start_array(std::size_t) override { return Open(Node::Kind::kSequence); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

  bool key(string_t& k) override {
    Mark mark = TokenMark();
    if (!CountBytes(k.size(), mark)) return false;
    Node& map = *stack_.back();
    map.entries.push_back(MapEntry{std::move(k), mark, Node{}});
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 2, column 5: syntax error ..."
    Mark mark{};
    std::size_t at = what.find(" at line ");
    if (at != std::string::npos) {
      std::sscanf(what.c_str() + at, " at line %d, column %d", &mark.line, &mark.column);
    }
    std::size_t colon = what.find(": ", at == std::string::npos ? 0 : at);
    std::string message = colon == std::string::npos ? what : what.substr(colon + 2);
    error_ = Diagnostic{mark, "", "JSON syntax error: " + message};
    return false;
  }

  std::optional<Node> root_;
  std::optional<Diagnostic> error_;
  bool too_large_ = false;

 private:
  // JSON cannot repeat a value, so its text bounds this already; counted the same way
  // as YAML's so that one limit means one thing for both.
  bool CountBytes(std::size_t n, Mark mark) {
    bytes_ += n;
    if (bytes_ <= max_bytes_) return true;
    error_ = Diagnostic{mark, "", DocumentTooLargeMessage(max_bytes_)};
    too_large_ = true;
    return false;
  }

  // The position of the token just read: the first character after the previous token
  // that is not blank or a separator.
  Mark TokenMark() {
    std::size_t i = last_end_;
    while (i < text_.size() && (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' ||
                                text_[i] == '\r' || text_[i] == ',' || text_[i] == ':')) {
      ++i;
    }
    last_end_ = std::max(consumed_, i);
    return lines_.At(std::min(i, text_.empty() ? 0 : text_.size() - 1));
  }

  // Where the next value goes: the root, the last key's slot, or a new list item.
  Node* Slot() {
    if (stack_.empty()) {
      root_.emplace();
      return &*root_;
    }
    Node& parent = *stack_.back();
    if (parent.kind == Node::Kind::kMap) return &parent.entries.back().value;
    parent.items.emplace_back();
    return &parent.items.back();
  }

  bool Scalar(Node::Kind kind, std::string text) {
    Mark mark = TokenMark();
    if (++nodes_ > kMaxDocumentNodes) return TooLarge(mark);
    if (!CountBytes(text.size(), mark)) return false;
    Node* slot = Slot();
    slot->kind = kind;
    slot->text = std::move(text);
    slot->mark = mark;
    return true;
  }

  bool Open(Node::Kind kind) {
    Mark mark = TokenMark();
    if (stack_.size() >= static_cast<std::size_t>(kMaxDocumentDepth)) {
      error_ = Diagnostic{mark, "", "document nested too deeply"};
      return false;
    }
    if (++nodes_ > kMaxDocumentNodes) return TooLarge(mark);
    Node* slot = Slot();
    slot->kind = kind;
    slot->mark = mark;
    stack_.push_back(slot);
    return true;
  }

  bool Close() {
    TokenMark();
    stack_.pop_back();
    return true;
  }

  bool TooLarge(Mark mark) {
    error_ = Diagnostic{mark, "", "document too large (too many nodes)"};
    too_large_ = true;
    return false;
  }

  std::string_view text_;
  const std::size_t& consumed_;
  LineIndex lines_;
  std::size_t last_end_ = 0;
  std::size_t max_bytes_;
  std::size_t nodes_ = 0;
  std::size_t bytes_ = 0;
  // Pointers into the tree stay valid: a container's children are only appended to
  // while it is the innermost open one, and its own slot no longer moves by then.
  std::vector<Node*> stack_;
};

ParsedDocument ParseJson(std::string_view text, std::size_t max_bytes) {
  ParsedDocument result;
  std::size_t consumed = 0;
  JsonBuilder builder(text, consumed, max_bytes);
  CountingIterator first(text.data(), text.data(), &consumed);
  CountingIterator last(text.data() + text.size(), text.data(), nullptr);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(first, last, &builder);
  } catch (const std::exception& e) {
    result.error = Diagnostic{{}, "", std::string("JSON syntax error: ") + e.what()};
    return result;
  }
  if (!ok || !builder.root_) {
    result.error = builder.error_ ? builder.error_
                                  : Diagnostic{{1, 1}, "", "JSON syntax error: empty document"};
    result.too_large = builder.too_large_;
    return result;
  }
  result.root = std::move(builder.root_);
  return result;
}

}  // namespace

std::string Diagnostic::ToString() const {
  std::string s;
  if (mark.known()) s = std::to_string(mark.line) + ":" + std::to_string(mark.column) + ": ";
  if (!path.empty()) s += path + ": ";
  return s + message;
}

std::string_view Node::KindName() const {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kSequence:
      return "list";
    case Kind::kMap:
      return "map";
  }
  return "value";
}

DocumentFormat SniffFormat(std::string_view text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{' || c == '[' ? DocumentFormat::kJson : DocumentFormat::kYaml;
  }
  return DocumentFormat::kYaml;
}

std::string DocumentTooLargeMessage(std::size_t max_bytes) {
  return "document too large: it expands to more than " + std::to_string(max_bytes) +
         " bytes of text (a YAML alias counts each time it is used)";
}

std::size_t InvalidUtf8At(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xE  ? 3
                      : (c >> 3) == 0x1E ? 4
                                         : 0;
    if (len == 0 || i + len > text.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return i;
    }
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; k < len; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    bool overlong =
        (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::size_t NonPrintableAt(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 ? c != '\t' && c != '\n' && c != '\r' : c == 0x7F) return i;
    // C1 controls are U+0080..U+009F, encoded C2 80..C2 9F; NEL (U+0085) is allowed.
    if (c == 0xC2 && i + 1 < text.size()) {
      auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9F && next != 0x85) return i;
    }
    // U+FFFE and U+FFFF are EF BF BE and EF BF BF.
    if (c == 0xEF && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0xBF &&
        static_cast<unsigned char>(text[i + 2]) >= 0xBE) {
      return i;
    }
  }
  return std::string_view::npos;
}

ParsedDocument ParseDocument(std::string_view text, DocumentFormat format, std::size_t max_bytes) {
  // Everything downstream (JSON, the datastore, the API) needs valid UTF-8.
  if (std::size_t bad = InvalidUtf8At(text); bad != std::string_view::npos) {
    ParsedDocument result;
    result.error = Diagnostic{LineIndex(text).At(bad), "",
                              "the document is not valid UTF-8 (a bad byte here)"};
    return result;
  }
  // JSON refuses raw controls in its strings itself (and allows \u0000 escapes, which
  // give valid UTF-8); YAML's must be refused here.
  if (format == DocumentFormat::kYaml) {
    if (std::size_t bad = NonPrintableAt(text); bad != std::string_view::npos) {
      ParsedDocument result;
      result.error = Diagnostic{
          LineIndex(text).At(bad), "",
          "the document has a control character YAML does not allow (write it escaped in a "
          "double-quoted string, e.g. \"\\u0000\")"};
      return result;
    }
  }
  return format == DocumentFormat::kJson ? ParseJson(text, max_bytes) : ParseYaml(text, max_bytes);
}

}  // namespace baton
