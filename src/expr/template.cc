// `{{ expr }}` templates, and the rendering of values as text.
#include <exception>
#include <string>
#include <vector>

#include "expr/internal.h"

namespace baton::expr {
namespace {

using internal::Lexer;
using internal::Token;
using internal::TokenKind;

// A run of plain text, or the expression between one `{{` and its `}}`.
struct Piece {
  bool is_expression = false;
  std::string_view text;
};

// The offset of the `}}` that closes the expression starting at `begin`, or npos. The
// expression is lexed, so `}}` inside a string literal does not close it, and braces of
// map literals are counted, so `{{ {"a": {"b": 1}} }}` closes at the last `}}`.
std::size_t FindClose(std::string_view text, std::size_t begin) {
  Lexer lexer(text, begin);
  std::size_t depth = 0;
  while (true) {
    Result<Token> token = lexer.Next();
    // Past a malformed token, the first `}}` is the end: the parser then reports the token.
    if (!token.ok()) return text.find("}}", lexer.pos());
    if (token->kind == TokenKind::kEnd) return std::string_view::npos;
    if (token->kind != TokenKind::kPunct) continue;
    if (token->text == "{") {
      ++depth;
    } else if (token->text == "}") {
      if (depth > 0) {
        --depth;
      } else if (token->end < text.size() && text[token->end] == '}') {
        return token->offset;
      }
    }
  }
}

Status TooLong() {
  return InvalidArgument("template result longer than " + std::to_string(kMaxStringBytes) +
                         " bytes");
}

Result<std::vector<Piece>> Split(std::string_view text) {
  std::vector<Piece> pieces;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t open = text.find("{{", i);
    const std::size_t stray = text.find("}}", i);
    if (stray < open) {
      return InvalidArgument("unexpected \"}}\" at offset " + std::to_string(stray));
    }
    if (open == std::string_view::npos) {
      pieces.push_back({false, text.substr(i)});
      break;
    }
    if (open > i) pieces.push_back({false, text.substr(i, open - i)});
    const std::size_t close = FindClose(text, open + 2);
    if (close == std::string_view::npos) {
      return InvalidArgument("unclosed \"{{\" at offset " + std::to_string(open));
    }
    pieces.push_back({true, text.substr(open + 2, close - open - 2)});
    i = close + 2;
  }
  return pieces;
}

}  // namespace

bool HasTemplate(std::string_view text) { return text.find("{{") != std::string_view::npos; }

Status CheckTemplate(std::string_view text) {
  try {
    Result<std::vector<Piece>> pieces = Split(text);
    if (!pieces.ok()) return pieces.status();
    for (const Piece& piece : *pieces) {
      if (piece.is_expression) BATON_RETURN_IF_ERROR(CheckExpression(piece.text));
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return InvalidArgument(e.what());
  }
}

Result<std::string> EvaluateTemplate(std::string_view text, const Vars& vars,
                                     const EvalOptions& options) {
  try {
    Result<std::vector<Piece>> pieces = Split(text);
    if (!pieces.ok()) return pieces.status();
    internal::Context ctx(vars, options);
    std::string out;
    for (const Piece& piece : *pieces) {
      if (piece.is_expression) {
        Result<Value> value = internal::EvaluateExpression(piece.text, ctx);
        if (!value.ok()) return value.status();
        if (out.size() + internal::MinTextSize(*value) > kMaxStringBytes) return TooLong();
        const std::string rendered = ToText(*value);
        if (Status charged = ctx.Charge(rendered.size()); !charged.ok()) {
          return internal::WithExpression(piece.text, charged.message());
        }
        out += rendered;
      } else {
        out += piece.text;
      }
      if (out.size() > kMaxStringBytes) return TooLong();
    }
    return out;
  } catch (const std::exception& e) {
    return InvalidArgument(e.what());
  }
}

Result<Value> EvaluateTemplateValue(std::string_view text, const Vars& vars,
                                    const EvalOptions& options) {
  const std::string_view trimmed = internal::TrimSpace(text);
  if (trimmed.starts_with("{{")) {
    try {
      Result<std::vector<Piece>> pieces = Split(trimmed);
      if (pieces.ok() && pieces->size() == 1 && pieces->front().is_expression) {
        return Evaluate(pieces->front().text, vars, options);
      }
    } catch (const std::exception&) {
      // Fall through: EvaluateTemplate reports it, with offsets in the untrimmed text.
    }
  }
  Result<std::string> rendered = EvaluateTemplate(text, vars, options);
  if (!rendered.ok()) return rendered.status();
  return Value(std::move(rendered).value());
}

std::string ToText(const Value& value) {
  switch (value.type()) {
    case Value::value_t::string:
      return value.get<std::string>();
    case Value::value_t::null:
      return "";
    case Value::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Value::value_t::number_integer:
      return std::to_string(value.get<std::int64_t>());
    case Value::value_t::number_unsigned:
      return std::to_string(value.get<std::uint64_t>());
    case Value::value_t::number_float: {
      // nlohmann prints the shortest form that reads back exactly, with ".0" on integral
      // values to keep them floats in JSON; as text, 2.0 reads better as "2".
      std::string text = value.dump();
      if (text.ends_with(".0")) text.resize(text.size() - 2);
      return text;
    }
    default:
      return value.dump(-1, ' ', false, Value::error_handler_t::replace);
  }
}

}  // namespace baton::expr
