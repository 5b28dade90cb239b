// Internals of the expression language shared by its .cc files: tokens, the syntax
// tree, the evaluation context and the function table. Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "expr/expr.h"

namespace baton::expr::internal {

// ---- Lexer -------------------------------------------------------------------------

enum class TokenKind { kEnd, kInt, kFloat, kString, kName, kPunct };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::size_t offset = 0;  // where the token starts in the source
  std::size_t end = 0;     // one past its last byte
  std::string text;        // kName/kPunct: the spelling; kString: the decoded value
  // kInt: the magnitude. It may be 2^63, which is only valid right after a unary minus.
  std::uint64_t int_value = 0;
  double float_value = 0;
};

// Reads tokens one at a time, so the template scanner can find the `}}` that closes an
// expression without mistaking one inside a string literal for it.
class Lexer {
 public:
  explicit Lexer(std::string_view source, std::size_t pos = 0) : src_(source), pos_(pos) {}

  // The next token (kEnd at the end). On error the message is "syntax error at offset N:
  // ..." and pos() is where the bad token starts.
  Result<Token> Next();
  std::size_t pos() const { return pos_; }

 private:
  Result<Token> LexNumber();
  Result<Token> LexString();

  std::string_view src_;
  std::size_t pos_;
};

// "syntax error at offset N: what".
Status SyntaxError(std::size_t offset, std::string_view what);

// ---- Syntax tree -------------------------------------------------------------------

enum class Op {
  kNone,
  // Binary.
  kOr,
  kAnd,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kIn,
  kNotIn,
  kMatches,
  kContains,
  kStartsWith,
  kEndsWith,
  kRange,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kPow,
  kCoalesce,
  // Unary.
  kNot,
  kNeg,
  kPlus,
};

// The operator as it is spelled in messages ("and", "+", "not in", ...).
std::string_view OpName(Op op);

enum class NodeKind {
  kLiteral,      // literal
  kName,         // name: a variable
  kList,         // children: the elements
  kMap,          // keys[i]: children[i]
  kMember,       // children[0].name (also `?.name`)
  kIndex,        // children[0][children[1]]
  kSlice,        // children[0][children[1]:children[2]]; bounds may be null
  kCall,         // function(children...)
  kUnary,        // op children[0]
  kBinary,       // children[0] op children[1]
  kConditional,  // children[0] ? children[1] : children[2]
};

struct Function;

struct Node {
  NodeKind kind = NodeKind::kLiteral;
  std::size_t offset = 0;
  int height = 1;  // of the subtree; capped at kMaxDepth so evaluation cannot overflow
  Op op = Op::kNone;
  Value literal;
  std::string name;
  const Function* function = nullptr;
  std::vector<std::string> keys;
  std::vector<std::unique_ptr<Node>> children;
};
using NodePtr = std::unique_ptr<Node>;

// Parses an expression (without braces). Messages carry no ` in "{{ ... }}"` suffix.
Result<NodePtr> Parse(std::string_view expression);

// ---- Evaluation --------------------------------------------------------------------

// A value that is either borrowed (from the variables or a literal in the tree, which
// outlive the evaluation) or owned. Borrowing keeps `tasks.x` from copying all of tasks.
class Slot {
 public:
  Slot() = default;
  explicit Slot(Value value) : owned_(std::move(value)) {}
  static Slot Borrow(const Value& value) {
    Slot slot;
    slot.ref_ = &value;
    return slot;
  }

  const Value& get() const { return ref_ != nullptr ? *ref_ : owned_; }
  const Value* operator->() const { return &get(); }
  bool borrowed() const { return ref_ != nullptr; }
  Value& owned() { return owned_; }  // only when !borrowed()

 private:
  const Value* ref_ = nullptr;
  Value owned_;
};

// What one evaluation may use. Besides the per-value caps, a work budget bounds what an
// evaluation does in total (bytes produced or copied, kElementCost per element made, and
// regex steps), so that no expression of at most kMaxExpressionBytes can take more than
// about a second or a few hundred megabytes, however it combines functions.
class Context {
 public:
  Context(const Vars& vars, const EvalOptions& options) : vars_(vars), options_(options) {}

  const Vars& vars() const { return vars_; }
  const EvalOptions& options() const { return options_; }

  // Spends `units` of the budget; an error once it is exhausted.
  Status Charge(std::size_t units);
  // The value of `slot` as an owned value (a charged copy when borrowed).
  Result<Value> Take(Slot&& slot);

 private:
  const Vars& vars_;
  const EvalOptions& options_;
  std::size_t spent_ = 0;
};

// Work charged per element of a list or map, besides its contents: making one costs
// far more than copying a byte.
inline constexpr std::size_t kElementCost = 64;

// Evaluates a parsed expression. Messages carry no suffix.
Result<Value> EvaluateTree(const Node& root, Context& ctx);

// An error when `expression` is longer than kMaxExpressionBytes.
Status CheckLength(std::string_view expression);

// Parses and evaluates `expression` within `ctx` (a template's expressions share one
// budget). Messages carry the ` in "{{ ... }}"` suffix.
Result<Value> EvaluateExpression(std::string_view expression, Context& ctx);

// ---- Functions and value helpers ---------------------------------------------------

using FunctionImpl = Result<Value> (*)(Context& ctx, std::vector<Slot>& args);

struct Function {
  std::string_view name;
  int min_args;
  int max_args;  // -1: any number
  FunctionImpl impl;
};

// The function called `name`, or null.
const Function* FindFunction(std::string_view name);

// `subject matches pattern`, with the pattern's size and complexity capped.
Result<bool> RegexMatches(Context& ctx, std::string_view subject, std::string_view pattern);

// "nil", "bool", "int", "float", "string", "list", "map".
std::string TypeName(const Value& value);

// Integers are int64; a JSON unsigned above INT64_MAX counts as a float.
bool IsInt(const Value& value);
bool IsNumber(const Value& value);
std::int64_t IntOf(const Value& value);  // only when IsInt
double FloatOf(const Value& value);      // only when IsNumber

// Length of the UTF-8 sequence starting at s[i] (1 for an invalid byte).
std::size_t CodePointLength(std::string_view s, std::size_t i);
// The number of code points in `s`.
std::size_t CodePointCount(std::string_view s);
// The byte offset where code point `k` of `s` starts (s.size() when k is the count).
std::size_t CodePointOffset(std::string_view s, std::size_t k);

// A lower bound on the bytes of ToText(value) and value.dump(), found without rendering,
// so that a value too big to render is refused before the work of rendering it.
std::size_t MinTextSize(const Value& value);

// haystack.find(needle, from), in linear time even for long needles.
std::size_t FindText(std::string_view haystack, std::string_view needle, std::size_t from = 0);

// The message with ` in "{{ EXPR }}"` appended (EXPR trimmed, long ones truncated).
Status WithExpression(std::string_view expression, const std::string& message);

// `s` without leading and trailing whitespace.
std::string_view TrimSpace(std::string_view s);

}  // namespace baton::expr::internal
