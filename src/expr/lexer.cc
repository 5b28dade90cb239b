// The tokenizer of the expression language.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <system_error>

#include "expr/internal.h"

namespace baton::expr::internal {
namespace {

constexpr std::uint64_t kMaxIntMagnitude = std::uint64_t{1} << 63;  // |INT64_MIN|

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsAlpha(c) || IsDigit(c); }
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

void AppendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Longest first, so that "**" is not read as two "*".
constexpr std::string_view kPuncts[] = {
    "**", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "..", "+", "-", "*", "/", "%",
    "^",  "<",  ">",  "!",  "?",  ":",  ".",  ",",  "(",  ")",  "[", "]", "{", "}",
};

}  // namespace

Status SyntaxError(std::size_t offset, std::string_view what) {
  return InvalidArgument("syntax error at offset " + std::to_string(offset) + ": " +
                         std::string(what));
}

Result<Token> Lexer::Next() {
  while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
  Token token;
  token.offset = token.end = pos_;
  if (pos_ >= src_.size()) return token;
  const char c = src_[pos_];
  if (IsDigit(c)) return LexNumber();
  if (c == '"' || c == '\'' || c == '`') return LexString();
  if (IsAlpha(c)) {
    std::size_t end = pos_;
    while (end < src_.size() && IsNameChar(src_[end])) ++end;
    token.kind = TokenKind::kName;
    token.text = std::string(src_.substr(pos_, end - pos_));
    token.end = pos_ = end;
    return token;
  }
  for (std::string_view punct : kPuncts) {
    if (src_.substr(pos_, punct.size()) == punct) {
      token.kind = TokenKind::kPunct;
      token.text = std::string(punct);
      token.end = pos_ += punct.size();
      return token;
    }
  }
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x20 && byte < 0x7F) {
    return SyntaxError(pos_, std::string("unexpected character \"") + c + "\"");
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", byte);
  return SyntaxError(pos_, std::string("unexpected byte ") + hex);
}

Result<Token> Lexer::LexNumber() {
  Token token;
  token.offset = pos_;
  std::size_t i = pos_;
  int base = 10;
  if (src_[i] == '0' && i + 1 < src_.size()) {
    const char p = src_[i + 1];
    if (p == 'x' || p == 'X') base = 16;
    if (p == 'o' || p == 'O') base = 8;
    if (p == 'b' || p == 'B') base = 2;
    if (base != 10) i += 2;
  }
  // Digits with `_` separators (which must sit between digits, as in Go and expr-lang).
  std::string digits;
  bool is_float = false;
  bool bad = false;
  auto read_digits = [&](int digit_base) {
    const std::size_t start = digits.size();
    while (i < src_.size()) {
      const char d = src_[i];
      if (d == '_') {
        if (digits.size() == start || i + 1 >= src_.size() ||
            DigitValue(src_[i + 1]) >= digit_base) {
          bad = true;
        }
        ++i;
      } else if (DigitValue(d) < digit_base) {
        digits += d;
        ++i;
      } else {
        break;
      }
    }
    if (digits.size() == start) bad = true;
  };
  read_digits(base);
  if (base == 10) {
    // A dot makes a float only before a digit: `1..3` is a range, `1.5` a float.
    if (i + 1 < src_.size() && src_[i] == '.' && IsDigit(src_[i + 1])) {
      is_float = true;
      digits += src_[i++];
      read_digits(10);
    }
    if (i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
      std::size_t j = i + 1;
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
      if (j < src_.size() && IsDigit(src_[j])) {
        is_float = true;
        digits += 'e';
        if (src_[i + 1] == '-') digits += '-';
        i = j;
        read_digits(10);
      }
    }
  }
  // `1abc` and `0x1G` are malformed numbers, not a number followed by a name.
  if (bad || (i < src_.size() && IsNameChar(src_[i]))) {
    return SyntaxError(pos_, "invalid number");
  }
  if (is_float) {
    double value = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc::result_out_of_range || !std::isfinite(value)) {
      return SyntaxError(pos_, "number out of range");
    }
    if (ec != std::errc() || ptr != digits.data() + digits.size()) {
      return SyntaxError(pos_, "invalid number");
    }
    token.kind = TokenKind::kFloat;
    token.float_value = value;
  } else {
    std::uint64_t value = 0;
    for (char d : digits) {
      const auto v = static_cast<std::uint64_t>(DigitValue(d));
      if (value > (kMaxIntMagnitude - v) / static_cast<std::uint64_t>(base)) {
        return SyntaxError(pos_, "number too large");
      }
      value = value * static_cast<std::uint64_t>(base) + v;
    }
    token.kind = TokenKind::kInt;
    token.int_value = value;
  }
  token.end = pos_ = i;
  return token;
}

Result<Token> Lexer::LexString() {
  Token token;
  token.kind = TokenKind::kString;
  token.offset = pos_;
  const char quote = src_[pos_];
  std::size_t i = pos_ + 1;
  auto read_hex = [&](std::size_t at, int n, std::uint32_t& out) {
    out = 0;
    if (at + static_cast<std::size_t>(n) > src_.size()) return false;
    for (int k = 0; k < n; ++k) {
      const int d = DigitValue(src_[at + static_cast<std::size_t>(k)]);
      if (d >= 16) return false;
      out = out * 16 + static_cast<std::uint32_t>(d);
    }
    return true;
  };
  while (true) {
    if (i >= src_.size()) return SyntaxError(pos_, "unterminated string");
    const char c = src_[i];
    if (c == quote) break;
    // Backquoted strings are raw, as in expr-lang.
    if (c != '\\' || quote == '`') {
      token.text += c;
      ++i;
      continue;
    }
    const std::size_t escape = i;
    if (++i >= src_.size()) return SyntaxError(pos_, "unterminated string");
    const char e = src_[i++];
    switch (e) {
      case 'n':
        token.text += '\n';
        break;
      case 't':
        token.text += '\t';
        break;
      case 'r':
        token.text += '\r';
        break;
      case 'b':
        token.text += '\b';
        break;
      case 'f':
        token.text += '\f';
        break;
      case 'v':
        token.text += '\v';
        break;
      case '0':
        token.text += '\0';
        break;
      case '\\':
      case '\'':
      case '"':
      case '/':
      case '`':
        token.text += e;
        break;
      case 'x': {
        std::uint32_t byte = 0;
        if (!read_hex(i, 2, byte)) return SyntaxError(escape, "invalid \\x escape");
        token.text += static_cast<char>(byte);
        i += 2;
        break;
      }
      case 'u': {
        std::uint32_t cp = 0;
        if (!read_hex(i, 4, cp)) return SyntaxError(escape, "invalid \\u escape");
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {
          // A high surrogate must be followed by an escaped low one: "\uD83D\uDE00".
          std::uint32_t low = 0;
          if (i + 1 >= src_.size() || src_[i] != '\\' || src_[i + 1] != 'u' ||
              !read_hex(i + 2, 4, low) || low < 0xDC00 || low >= 0xE000) {
            return SyntaxError(escape, "invalid surrogate pair in \\u escape");
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          i += 6;
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return SyntaxError(escape, "invalid surrogate pair in \\u escape");
        }
        AppendUtf8(token.text, cp);
        break;
      }
      default: {
        const auto byte = static_cast<unsigned char>(e);
        return SyntaxError(escape, byte >= 0x20 && byte < 0x7F
                                       ? std::string("invalid escape \\") + e
                                       : std::string("invalid escape"));
      }
    }
  }
  token.end = pos_ = i + 1;
  return token;
}

}  // namespace baton::expr::internal
