// A Pratt parser from tokens to the syntax tree, with expr-lang's precedences.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "expr/internal.h"

namespace baton::expr::internal {
namespace {

struct BinaryInfo {
  std::string_view spelling;
  Op op;
  int precedence;
  bool right_assoc = false;
};

// expr-lang's binary operators and precedences; the first spelling of an operator is
// its name in messages. Unary `not`/`!` bind at 50 and `-`/`+` at 90; the ternary binds
// loosest of all.
constexpr BinaryInfo kBinaryOps[] = {
    {"or", Op::kOr, 10},
    {"||", Op::kOr, 10},
    {"and", Op::kAnd, 15},
    {"&&", Op::kAnd, 15},
    {"==", Op::kEq, 20},
    {"!=", Op::kNe, 20},
    {"<", Op::kLt, 20},
    {"<=", Op::kLe, 20},
    {">", Op::kGt, 20},
    {">=", Op::kGe, 20},
    {"in", Op::kIn, 20},
    {"not in", Op::kNotIn, 20},
    {"matches", Op::kMatches, 20},
    {"contains", Op::kContains, 20},
    {"startsWith", Op::kStartsWith, 20},
    {"endsWith", Op::kEndsWith, 20},
    {"..", Op::kRange, 25},
    {"+", Op::kAdd, 30},
    {"-", Op::kSub, 30},
    {"*", Op::kMul, 60},
    {"/", Op::kDiv, 60},
    {"%", Op::kMod, 60},
    {"**", Op::kPow, 100, true},
    {"^", Op::kPow, 100, true},
    {"??", Op::kCoalesce, 500},
};
constexpr int kNotPrecedence = 50;
constexpr int kSignPrecedence = 90;

const BinaryInfo* FindBinary(std::string_view spelling) {
  for (const BinaryInfo& info : kBinaryOps) {
    if (info.spelling == spelling) return &info;
  }
  return nullptr;
}

bool IsKeyword(std::string_view w) {
  return FindBinary(w) != nullptr || w == "not" || w == "true" || w == "false" || w == "nil";
}

// Marks the literal 9223372036854775808, which is only valid right after a unary minus.
constexpr std::string_view kMinIntMagnitude = "2^63";

Status TooDeep() { return InvalidArgument("expression nested too deeply"); }

std::string ArityText(const Function& f) {
  if (f.max_args < 0) return "at least " + std::to_string(f.min_args);
  if (f.min_args == f.max_args) return std::to_string(f.min_args);
  return std::to_string(f.min_args) + " or " + std::to_string(f.max_args);
}

class Parser {
 public:
  explicit Parser(std::string_view source) : src_(source), lexer_(source) {}

  Result<NodePtr> ParseAll() {
    BATON_RETURN_IF_ERROR(Advance());
    Result<NodePtr> root = ParseExpression(0);
    if (!root.ok()) return root;
    if (tok_.kind != TokenKind::kEnd) return Unexpected();
    BATON_RETURN_IF_ERROR(CheckNoBareMinInt(**root));
    return root;
  }

 private:
  // Counts recursion so `((((...` and `!!!!...` end in an error, not a stack overflow.
  class DepthGuard {
   public:
    explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
    ~DepthGuard() { --depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    bool too_deep() const { return depth_ > kMaxDepth; }

   private:
    int& depth_;
  };

  Status Advance() {
    Result<Token> next = lexer_.Next();
    if (!next.ok()) return next.status();
    tok_ = std::move(next).value();
    return Status::Ok();
  }
  bool IsPunct(std::string_view p) const {
    return tok_.kind == TokenKind::kPunct && tok_.text == p;
  }
  bool IsWord(std::string_view w) const { return tok_.kind == TokenKind::kName && tok_.text == w; }

  Status Unexpected() const {
    if (tok_.kind == TokenKind::kEnd)
      return SyntaxError(tok_.offset, "unexpected end of expression");
    std::size_t size = tok_.end - tok_.offset;
    if (size > 32) {  // a long string literal: show its start, cut at a code point
      for (size = 32;
           size > 0 && (static_cast<unsigned char>(src_[tok_.offset + size]) & 0xC0) == 0x80;)
        --size;
    }
    return SyntaxError(tok_.offset,
                       "unexpected \"" + std::string(src_.substr(tok_.offset, size)) + "\"");
  }
  Status Expect(std::string_view p) {
    if (!IsPunct(p)) return Unexpected();
    return Advance();
  }

  static NodePtr NewNode(NodeKind kind, std::size_t offset) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->offset = offset;
    return node;
  }
  // Sets the height of a finished node. Left-associative chains (`1+1+1...`, `a.b.c...`)
  // grow the tree without parser recursion, so the tree's height is capped here too.
  static Result<NodePtr> Seal(NodePtr node) {
    int height = 0;
    for (const NodePtr& child : node->children) {
      if (child) height = std::max(height, child->height);
    }
    node->height = height + 1;
    if (node->height > kMaxDepth) return TooDeep();
    return node;
  }

  // The binary operator at the current token, if any (`not in` spans two tokens).
  const BinaryInfo* PeekBinary() const {
    if (tok_.kind != TokenKind::kPunct && tok_.kind != TokenKind::kName) return nullptr;
    if (tok_.text == "not") {
      Lexer ahead = lexer_;
      Result<Token> next = ahead.Next();
      const bool in = next.ok() && next->kind == TokenKind::kName && next->text == "in";
      return in ? FindBinary("not in") : nullptr;
    }
    return FindBinary(tok_.text);
  }

  Result<NodePtr> ParseExpression(int min_precedence) {
    DepthGuard guard(depth_);
    if (guard.too_deep()) return TooDeep();
    Result<NodePtr> left = ParseOperand();
    if (!left.ok()) return left;
    NodePtr node = std::move(left).value();
    while (true) {
      const BinaryInfo* info = PeekBinary();
      if (!info || info->precedence < min_precedence) break;
      NodePtr binary = NewNode(NodeKind::kBinary, tok_.offset);
      binary->op = info->op;
      BATON_RETURN_IF_ERROR(Advance());
      if (info->op == Op::kNotIn) BATON_RETURN_IF_ERROR(Advance());
      Result<NodePtr> right =
          ParseExpression(info->right_assoc ? info->precedence : info->precedence + 1);
      if (!right.ok()) return right;
      binary->children.push_back(std::move(node));
      binary->children.push_back(std::move(right).value());
      Result<NodePtr> sealed = Seal(std::move(binary));
      if (!sealed.ok()) return sealed;
      node = std::move(sealed).value();
    }
    // The ternary binds loosest and nests to the right: a ? b : c ? d : e.
    if (min_precedence == 0 && IsPunct("?")) {
      NodePtr cond = NewNode(NodeKind::kConditional, tok_.offset);
      BATON_RETURN_IF_ERROR(Advance());
      Result<NodePtr> then = ParseExpression(0);
      if (!then.ok()) return then;
      BATON_RETURN_IF_ERROR(Expect(":"));
      Result<NodePtr> otherwise = ParseExpression(0);
      if (!otherwise.ok()) return otherwise;
      cond->children.push_back(std::move(node));
      cond->children.push_back(std::move(then).value());
      cond->children.push_back(std::move(otherwise).value());
      return Seal(std::move(cond));
    }
    return node;
  }

  // A prefix operator and its operand, or a primary with its postfixes.
  Result<NodePtr> ParseOperand() {
    Op op = Op::kNone;
    int precedence = 0;
    if (IsWord("not") || IsPunct("!")) {
      op = Op::kNot;
      precedence = kNotPrecedence;
    } else if (IsPunct("-") || IsPunct("+")) {
      op = IsPunct("-") ? Op::kNeg : Op::kPlus;
      precedence = kSignPrecedence;
    }
    if (op == Op::kNone) {
      Result<NodePtr> primary = ParsePrimary();
      if (!primary.ok()) return primary;
      return ParsePostfix(std::move(primary).value());
    }
    NodePtr unary = NewNode(NodeKind::kUnary, tok_.offset);
    unary->op = op;
    BATON_RETURN_IF_ERROR(Advance());
    Result<NodePtr> operand = ParseExpression(precedence);
    if (!operand.ok()) return operand;
    NodePtr& child = operand.value();
    if (op == Op::kNeg && child->kind == NodeKind::kLiteral && child->name == kMinIntMagnitude) {
      // -9223372036854775808 is INT64_MIN, though its magnitude is no int64.
      child->literal = std::numeric_limits<std::int64_t>::min();
      child->name.clear();
      child->offset = unary->offset;
      return operand;
    }
    unary->children.push_back(std::move(child));
    return Seal(std::move(unary));
  }

  Result<NodePtr> ParsePrimary() {
    NodePtr node = NewNode(NodeKind::kLiteral, tok_.offset);
    switch (tok_.kind) {
      case TokenKind::kInt:
        if (tok_.int_value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          node->literal = tok_.int_value;
          node->name = std::string(kMinIntMagnitude);
        } else {
          node->literal = static_cast<std::int64_t>(tok_.int_value);
        }
        break;
      case TokenKind::kFloat:
        node->literal = tok_.float_value;
        break;
      case TokenKind::kString:
        node->literal = std::move(tok_.text);
        break;
      case TokenKind::kName:
        if (tok_.text == "true" || tok_.text == "false") {
          node->literal = tok_.text == "true";
        } else if (tok_.text == "nil") {
          node->literal = nullptr;
        } else if (IsKeyword(tok_.text)) {
          return Unexpected();
        } else {
          node->kind = NodeKind::kName;
          node->name = std::move(tok_.text);
          BATON_RETURN_IF_ERROR(Advance());
          if (IsPunct("(")) return ParseCall(std::move(node));
          return node;
        }
        break;
      case TokenKind::kPunct:
        if (IsPunct("(")) {
          BATON_RETURN_IF_ERROR(Advance());
          Result<NodePtr> inner = ParseExpression(0);
          if (!inner.ok()) return inner;
          BATON_RETURN_IF_ERROR(Expect(")"));
          return inner;
        }
        if (IsPunct("[")) return ParseList();
        if (IsPunct("{")) return ParseMap();
        return Unexpected();
      case TokenKind::kEnd:
        return Unexpected();
    }
    BATON_RETURN_IF_ERROR(Advance());
    return node;
  }

  // Parses `expr, expr, ... close` into node->children; a trailing comma is allowed.
  Status ParseItems(Node& node, std::string_view close, bool with_keys) {
    BATON_RETURN_IF_ERROR(Advance());  // the opening bracket
    while (!IsPunct(close)) {
      if (with_keys) {
        // Keys are names (keywords too: `{in: 1}`) or strings.
        if (tok_.kind != TokenKind::kName && tok_.kind != TokenKind::kString) return Unexpected();
        node.keys.push_back(std::move(tok_.text));
        BATON_RETURN_IF_ERROR(Advance());
        BATON_RETURN_IF_ERROR(Expect(":"));
      }
      Result<NodePtr> item = ParseExpression(0);
      if (!item.ok()) return item.status();
      node.children.push_back(std::move(item).value());
      if (!IsPunct(",")) break;
      BATON_RETURN_IF_ERROR(Advance());
    }
    return Expect(close);
  }

  Result<NodePtr> ParseList() {
    NodePtr node = NewNode(NodeKind::kList, tok_.offset);
    BATON_RETURN_IF_ERROR(ParseItems(*node, "]", false));
    return Seal(std::move(node));
  }

  Result<NodePtr> ParseMap() {
    NodePtr node = NewNode(NodeKind::kMap, tok_.offset);
    BATON_RETURN_IF_ERROR(ParseItems(*node, "}", true));
    return Seal(std::move(node));
  }

  // Functions are resolved here, so CheckExpression reports a wrong number of arguments
  // before anything runs. An unknown function is an error only when evaluated, like an
  // unknown variable: a job file naming one is accepted, and the task (or the job, for
  // `output`) fails with the reason when it gets there.
  Result<NodePtr> ParseCall(NodePtr node) {
    node->kind = NodeKind::kCall;
    node->function = FindFunction(node->name);
    BATON_RETURN_IF_ERROR(ParseItems(*node, ")", false));
    if (node->function == nullptr) return Seal(std::move(node));
    const Function& f = *node->function;
    const int count = static_cast<int>(node->children.size());
    if (count < f.min_args || (f.max_args >= 0 && count > f.max_args)) {
      const bool one = f.min_args == 1 && f.max_args <= 1;
      return InvalidArgument(node->name + ": want " + ArityText(f) +
                             (one ? " argument" : " arguments") + ", got " + std::to_string(count));
    }
    return Seal(std::move(node));
  }

  Result<NodePtr> ParsePostfix(NodePtr node) {
    while (true) {
      const std::size_t offset = tok_.offset;
      if (IsPunct(".") || IsPunct("?.")) {
        const bool optional = IsPunct("?.");
        BATON_RETURN_IF_ERROR(Advance());
        if (tok_.kind != TokenKind::kName) {
          if (!optional || !IsPunct("[")) return Unexpected();
          continue;  // `a?.[i]` is `a[i]`: both yield nil on nil
        }
        NodePtr member = NewNode(NodeKind::kMember, offset);
        member->name = std::move(tok_.text);
        member->children.push_back(std::move(node));
        BATON_RETURN_IF_ERROR(Advance());
        Result<NodePtr> sealed = Seal(std::move(member));
        if (!sealed.ok()) return sealed;
        node = std::move(sealed).value();
      } else if (IsPunct("[")) {
        Result<NodePtr> indexed = ParseIndex(std::move(node));
        if (!indexed.ok()) return indexed;
        node = std::move(indexed).value();
      } else {
        return node;
      }
    }
  }

  // `base[i]`, `base[from:to]`, with either slice bound optional.
  Result<NodePtr> ParseIndex(NodePtr base) {
    NodePtr node = NewNode(NodeKind::kIndex, tok_.offset);
    node->children.push_back(std::move(base));
    BATON_RETURN_IF_ERROR(Advance());
    NodePtr from;
    if (!IsPunct(":")) {
      Result<NodePtr> index = ParseExpression(0);
      if (!index.ok()) return index;
      from = std::move(index).value();
    }
    if (IsPunct(":")) {
      node->kind = NodeKind::kSlice;
      BATON_RETURN_IF_ERROR(Advance());
      NodePtr to;
      if (!IsPunct("]")) {
        Result<NodePtr> bound = ParseExpression(0);
        if (!bound.ok()) return bound;
        to = std::move(bound).value();
      }
      node->children.push_back(std::move(from));
      node->children.push_back(std::move(to));
    } else {
      node->children.push_back(std::move(from));
    }
    BATON_RETURN_IF_ERROR(Expect("]"));
    return Seal(std::move(node));
  }

  // 9223372036854775808 that did not end up negated is out of range.
  static Status CheckNoBareMinInt(const Node& node) {
    if (node.kind == NodeKind::kLiteral && node.name == kMinIntMagnitude) {
      return SyntaxError(node.offset, "number too large");
    }
    for (const NodePtr& child : node.children) {
      if (child) BATON_RETURN_IF_ERROR(CheckNoBareMinInt(*child));
    }
    return Status::Ok();
  }

  std::string_view src_;
  Lexer lexer_;
  Token tok_;
  int depth_ = 0;
};

}  // namespace

std::string_view OpName(Op op) {
  if (op == Op::kNot) return "not";
  if (op == Op::kNeg) return "-";
  if (op == Op::kPlus) return "+";
  for (const BinaryInfo& info : kBinaryOps) {
    if (info.op == op) return info.spelling;
  }
  return "?";
}

Result<NodePtr> Parse(std::string_view expression) {
  // Offsets count from the first non-blank byte, as the expression is quoted trimmed.
  const std::size_t start = expression.find_first_not_of(" \t\n\r\f\v");
  Parser parser(start == std::string_view::npos ? std::string_view() : expression.substr(start));
  return parser.ParseAll();
}

}  // namespace baton::expr::internal
