// The tree-walking evaluator, and the Evaluate / CheckExpression entry points.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "expr/internal.h"

namespace baton::expr::internal {

namespace {

// The work one evaluation may do (see Context): bytes produced or copied, plus
// kElementCost per list or map element made. About a million elements, which take about a
// second in an ASan build.
constexpr std::size_t kWorkBudget = std::size_t{72} << 20;
// Expressions are quoted in messages up to this many bytes.
constexpr std::size_t kMaxQuotedBytes = 200;

std::string Str(std::string_view s) { return std::string(s); }

Status Mismatch(Op op, const Value& a, const Value& b) {
  return InvalidArgument("invalid operation: " + Str(OpName(op)) + " (mismatched types " +
                         TypeName(a) + " and " + TypeName(b) + ")");
}

Status WrongOperand(Op op, const Value& v, std::string_view need) {
  return InvalidArgument("invalid operation: " + Str(OpName(op)) + " on " + TypeName(v) +
                         " (need " + Str(need) + ")");
}

Status TooLong(Op op) {
  return InvalidArgument("result of " + Str(OpName(op)) + " longer than " +
                         std::to_string(kMaxStringBytes) + " bytes");
}

Result<Value> Finite(double d, Op op) {
  if (!std::isfinite(d)) {
    return InvalidArgument("result of " + Str(OpName(op)) + " is not a finite number");
  }
  return Value(d);
}

// What copying `v` costs against the work budget.
std::size_t CopyCost(const Value& v) {
  std::size_t cost = kElementCost;
  if (v.is_string()) {
    cost += v.get_ref<const std::string&>().size();
  } else if (v.is_array()) {
    for (const Value& e : v) cost += CopyCost(e);
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) cost += it.key().size() + CopyCost(it.value());
  }
  return cost;
}

// -1, 0 or 1 for numbers or strings; a type error otherwise.
Result<int> Order(Op op, const Value& a, const Value& b) {
  if (IsInt(a) && IsInt(b)) {
    const std::int64_t x = IntOf(a), y = IntOf(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (IsNumber(a) && IsNumber(b)) {
    const double x = FloatOf(a), y = FloatOf(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return Mismatch(op, a, b);
}

class Evaluator {
 public:
  explicit Evaluator(Context& ctx) : ctx_(ctx) {}

  // `missing_ok` is set on the left of `??`: there an unknown variable, a missing key or
  // an index out of range is nil instead of an error.
  Result<Slot> Eval(const Node& node, bool missing_ok = false) {
    switch (node.kind) {
      case NodeKind::kLiteral:
        return Slot::Borrow(node.literal);
      case NodeKind::kName: {
        if (const Value* value = ctx_.vars().Find(node.name)) return Slot::Borrow(*value);
        if (missing_ok) return Slot();
        return InvalidArgument("unknown name " + node.name);
      }
      case NodeKind::kList:
        return EvalList(node);
      case NodeKind::kMap:
        return EvalMap(node);
      case NodeKind::kMember:
        return EvalMember(node, missing_ok);
      case NodeKind::kIndex:
        return EvalIndex(node, missing_ok);
      case NodeKind::kSlice:
        return EvalSlice(node, missing_ok);
      case NodeKind::kCall:
        return EvalCall(node);
      case NodeKind::kUnary:
        return EvalUnary(node);
      case NodeKind::kBinary:
        return EvalBinary(node);
      case NodeKind::kConditional: {
        Result<Slot> cond = Eval(*node.children[0]);
        if (!cond.ok()) return cond;
        if (!cond->get().is_boolean()) {
          return InvalidArgument("ternary condition must be bool, got " + TypeName(cond->get()));
        }
        return Eval(*node.children[cond->get().get<bool>() ? 1 : 2]);
      }
    }
    return InvalidArgument("internal error: unknown node");
  }

 private:
  Result<Slot> EvalList(const Node& node) {
    Value list = Value::array();
    for (const NodePtr& child : node.children) {
      Result<Value> item = EvalOwned(*child);
      if (!item.ok()) return item.status();
      list.push_back(std::move(item).value());
    }
    return Slot(std::move(list));
  }

  Result<Slot> EvalMap(const Node& node) {
    Value map = Value::object();
    for (std::size_t i = 0; i < node.children.size(); ++i) {
      Result<Value> item = EvalOwned(*node.children[i]);
      if (!item.ok()) return item.status();
      BATON_RETURN_IF_ERROR(ctx_.Charge(node.keys[i].size()));
      map[node.keys[i]] = std::move(item).value();
    }
    return Slot(std::move(map));
  }

  Result<Value> EvalOwned(const Node& node) {
    Result<Slot> slot = Eval(node);
    if (!slot.ok()) return slot.status();
    BATON_RETURN_IF_ERROR(ctx_.Charge(kElementCost));
    return ctx_.Take(std::move(slot).value());
  }

  // The element `key` of `base`, borrowed when base is borrowed.
  static Slot Element(Slot& base, const Value& element) {
    if (base.borrowed()) return Slot::Borrow(element);
    return Slot(std::move(const_cast<Value&>(element)));  // element lives in base.owned()
  }

  Result<Slot> EvalMember(const Node& node, bool missing_ok) {
    Result<Slot> base = Eval(*node.children[0], missing_ok);
    if (!base.ok()) return base;
    const Value& v = base->get();
    if (v.is_null()) return Slot();
    if (!v.is_object())
      return InvalidArgument("type " + TypeName(v) + " has no field " + node.name);
    auto it = v.find(node.name);
    if (it == v.end()) return Slot();
    return Element(base.value(), *it);
  }

  Result<Slot> EvalIndex(const Node& node, bool missing_ok) {
    Result<Slot> base = Eval(*node.children[0], missing_ok);
    if (!base.ok()) return base;
    Result<Slot> index_slot = Eval(*node.children[1]);
    if (!index_slot.ok()) return index_slot;
    const Value& v = base->get();
    const Value& index = index_slot->get();
    if (v.is_null()) return Slot();
    if (v.is_object()) {
      if (!index.is_string())
        return InvalidArgument("map key must be a string, got " + TypeName(index));
      auto it = v.find(index.get_ref<const std::string&>());
      if (it == v.end()) return Slot();
      return Element(base.value(), *it);
    }
    if (!v.is_array() && !v.is_string()) return InvalidArgument("cannot index " + TypeName(v));
    if (!IsInt(index)) return InvalidArgument("index must be an int, got " + TypeName(index));
    const std::size_t size =
        v.is_string() ? CodePointCount(v.get_ref<const std::string&>()) : v.size();
    const std::int64_t i = IntOf(index);
    // Negative indices count from the end.
    const std::int64_t at = i < 0 ? i + static_cast<std::int64_t>(size) : i;
    if (at < 0 || at >= static_cast<std::int64_t>(size)) {
      if (missing_ok) return Slot();
      return InvalidArgument("index out of range: " + std::to_string(i) + " (length " +
                             std::to_string(size) + ")");
    }
    const auto u = static_cast<std::size_t>(at);
    if (v.is_array()) return Element(base.value(), v[u]);
    const std::string& str = v.get_ref<const std::string&>();
    const std::size_t offset = CodePointOffset(str, u);
    return Slot(Value(str.substr(offset, CodePointLength(str, offset))));
  }

  Result<Slot> EvalSlice(const Node& node, bool missing_ok) {
    Result<Slot> base = Eval(*node.children[0], missing_ok);
    if (!base.ok()) return base;
    std::int64_t bounds[2] = {0, std::numeric_limits<std::int64_t>::max()};
    for (int k = 0; k < 2; ++k) {
      const NodePtr& child = node.children[static_cast<std::size_t>(k) + 1];
      if (!child) continue;
      Result<Slot> bound = Eval(*child);
      if (!bound.ok()) return bound;
      if (!IsInt(bound->get())) {
        return InvalidArgument("slice index must be an int, got " + TypeName(bound->get()));
      }
      bounds[k] = IntOf(bound->get());
    }
    const Value& v = base->get();
    if (v.is_null()) return Slot();
    if (!v.is_array() && !v.is_string()) return InvalidArgument("cannot slice " + TypeName(v));
    const auto size = static_cast<std::int64_t>(
        v.is_string() ? CodePointCount(v.get_ref<const std::string&>()) : v.size());
    // As expr-lang: negative bounds count from the end, then both are clamped.
    for (std::int64_t& b : bounds) {
      if (b < 0) b = std::max<std::int64_t>(0, b + size);
      b = std::min(b, size);
    }
    const auto from = static_cast<std::size_t>(std::min(bounds[0], bounds[1]));
    const auto to = static_cast<std::size_t>(bounds[1]);
    if (v.is_string()) {
      const std::string& str = v.get_ref<const std::string&>();
      const std::size_t begin = CodePointOffset(str, from);
      const std::size_t end =
          begin + CodePointOffset(std::string_view(str).substr(begin), to - from);
      BATON_RETURN_IF_ERROR(ctx_.Charge(kElementCost + end - begin));
      return Slot(Value(str.substr(begin, end - begin)));
    }
    Value list = Value::array();
    for (std::size_t i = from; i < to; ++i) {
      Slot element = Element(base.value(), v[i]);
      BATON_RETURN_IF_ERROR(ctx_.Charge(kElementCost));
      Result<Value> item = ctx_.Take(std::move(element));
      if (!item.ok()) return item.status();
      list.push_back(std::move(item).value());
    }
    return Slot(std::move(list));
  }

  Result<Slot> EvalCall(const Node& node) {
    if (node.function == nullptr) return InvalidArgument("unknown name " + node.name);
    std::vector<Slot> args;
    args.reserve(node.children.size());
    for (const NodePtr& child : node.children) {
      Result<Slot> arg = Eval(*child);
      if (!arg.ok()) return arg;
      args.push_back(std::move(arg).value());
    }
    Result<Value> result = node.function->impl(ctx_, args);
    if (!result.ok()) return InvalidArgument(node.name + ": " + result.status().message());
    return Slot(std::move(result).value());
  }

  Result<Slot> EvalUnary(const Node& node) {
    Result<Slot> operand = Eval(*node.children[0]);
    if (!operand.ok()) return operand;
    const Value& v = operand->get();
    switch (node.op) {
      case Op::kNot:
        if (!v.is_boolean()) return WrongOperand(node.op, v, "bool");
        return Slot(Value(!v.get<bool>()));
      case Op::kNeg:
        if (IsInt(v)) {
          const std::int64_t i = IntOf(v);
          if (i == std::numeric_limits<std::int64_t>::min()) {
            return InvalidArgument("integer overflow in -");
          }
          return Slot(Value(-i));
        }
        if (IsNumber(v)) return Slot(Value(-FloatOf(v)));
        return WrongOperand(node.op, v, "a number");
      default:  // unary plus
        if (!IsNumber(v)) return WrongOperand(node.op, v, "a number");
        return operand;
    }
  }

  Result<Slot> EvalBinary(const Node& node) {
    const Op op = node.op;
    if (op == Op::kAnd || op == Op::kOr) return EvalLogic(node);
    Result<Slot> left = Eval(*node.children[0], op == Op::kCoalesce);
    if (!left.ok()) return left;
    if (op == Op::kCoalesce) {
      if (!left->get().is_null()) return left;
      return Eval(*node.children[1]);
    }
    Result<Slot> right = Eval(*node.children[1]);
    if (!right.ok()) return right;
    const Value& a = left->get();
    const Value& b = right->get();
    switch (op) {
      case Op::kEq:
        return Slot(Value(a == b));
      case Op::kNe:
        return Slot(Value(a != b));
      case Op::kLt:
      case Op::kLe:
      case Op::kGt:
      case Op::kGe: {
        Result<int> c = Order(op, a, b);
        if (!c.ok()) return c.status();
        const int o = c.value();
        const bool r = op == Op::kLt   ? o < 0
                       : op == Op::kLe ? o <= 0
                       : op == Op::kGt ? o > 0
                                       : o >= 0;
        return Slot(Value(r));
      }
      case Op::kIn:
      case Op::kNotIn: {
        Result<bool> found = In(op, a, b);
        if (!found.ok()) return found.status();
        return Slot(Value(found.value() == (op == Op::kIn)));
      }
      case Op::kContains:
      case Op::kStartsWith:
      case Op::kEndsWith:
      case Op::kMatches: {
        if (!a.is_string() || !b.is_string()) return Mismatch(op, a, b);
        const std::string_view s = a.get_ref<const std::string&>();
        const std::string_view t = b.get_ref<const std::string&>();
        if (op == Op::kContains) return Slot(Value(FindText(s, t) != std::string_view::npos));
        if (op == Op::kStartsWith) return Slot(Value(s.substr(0, t.size()) == t));
        if (op == Op::kEndsWith) {
          return Slot(Value(s.size() >= t.size() && s.substr(s.size() - t.size()) == t));
        }
        Result<bool> matched = RegexMatches(ctx_, s, t);
        if (!matched.ok()) return matched.status();
        return Slot(Value(matched.value()));
      }
      case Op::kRange: {
        if (!IsInt(a) || !IsInt(b)) return Mismatch(op, a, b);
        const std::int64_t first = IntOf(a), last = IntOf(b);
        Value list = Value::array();
        if (first > last) return Slot(std::move(list));
        // The difference fits in uint64 even when the int64 subtraction would overflow.
        const std::uint64_t span =
            static_cast<std::uint64_t>(last) - static_cast<std::uint64_t>(first);
        if (span >= kMaxSequence) {
          return InvalidArgument("range " + std::to_string(first) + ".." + std::to_string(last) +
                                 " has more than " + std::to_string(kMaxSequence) + " elements");
        }
        BATON_RETURN_IF_ERROR(ctx_.Charge((span + 1) * kElementCost));
        for (std::int64_t i = first;; ++i) {
          list.push_back(i);
          if (i == last) break;
        }
        return Slot(std::move(list));
      }
      default:
        break;
    }
    if (op == Op::kAdd && a.is_array() && b.is_array()) {
      Result<Value> joined = ctx_.Take(std::move(left).value());
      if (!joined.ok()) return joined.status();
      Result<Value> tail = ctx_.Take(std::move(right).value());
      if (!tail.ok()) return tail.status();
      BATON_RETURN_IF_ERROR(ctx_.Charge(tail->size() * kElementCost));
      for (Value& e : tail.value()) joined->push_back(std::move(e));
      return Slot(std::move(joined).value());
    }
    Result<Value> value = Arithmetic(op, a, b);
    if (!value.ok()) return value.status();
    return Slot(std::move(value).value());
  }

  Result<Slot> EvalLogic(const Node& node) {
    // Short-circuits: the right side is evaluated only when it decides the result.
    for (std::size_t i = 0; i < 2; ++i) {
      Result<Slot> side = Eval(*node.children[i]);
      if (!side.ok()) return side;
      const Value& v = side->get();
      if (!v.is_boolean()) return WrongOperand(node.op, v, "bool");
      if (i == 1 || v.get<bool>() == (node.op == Op::kOr)) return Slot(Value(v.get<bool>()));
    }
    return Slot();
  }

  static Result<bool> In(Op op, const Value& needle, const Value& haystack) {
    if (haystack.is_null()) return false;
    if (haystack.is_array()) {
      return std::any_of(haystack.begin(), haystack.end(),
                         [&](const Value& e) { return e == needle; });
    }
    if (haystack.is_object()) {
      if (!needle.is_string()) return Mismatch(op, needle, haystack);
      return haystack.contains(needle.get_ref<const std::string&>());
    }
    return Mismatch(op, needle, haystack);
  }

  Result<Value> Arithmetic(Op op, const Value& a, const Value& b) {
    if (op == Op::kAdd && a.is_string() && b.is_string()) {
      const auto& s = a.get_ref<const std::string&>();
      const auto& t = b.get_ref<const std::string&>();
      if (s.size() + t.size() > kMaxStringBytes) return TooLong(op);
      BATON_RETURN_IF_ERROR(ctx_.Charge(s.size() + t.size()));
      return Value(s + t);
    }
    if (!IsNumber(a) || !IsNumber(b)) return Mismatch(op, a, b);
    if (IsInt(a) && IsInt(b) && op != Op::kDiv && op != Op::kPow) {
      const std::int64_t x = IntOf(a), y = IntOf(b);
      std::int64_t r = 0;
      bool overflow = false;
      switch (op) {
        case Op::kAdd:
          overflow = __builtin_add_overflow(x, y, &r);
          break;
        case Op::kSub:
          overflow = __builtin_sub_overflow(x, y, &r);
          break;
        case Op::kMul:
          overflow = __builtin_mul_overflow(x, y, &r);
          break;
        default:  // kMod
          if (y == 0) return InvalidArgument("division by zero");
          r = y == -1 ? 0 : x % y;  // INT64_MIN % -1 is undefined in C++
          break;
      }
      if (overflow) return InvalidArgument("integer overflow in " + Str(OpName(op)));
      return Value(r);
    }
    if (op == Op::kMod) return Mismatch(op, a, b);
    const double x = FloatOf(a), y = FloatOf(b);
    switch (op) {
      case Op::kAdd:
        return Finite(x + y, op);
      case Op::kSub:
        return Finite(x - y, op);
      case Op::kMul:
        return Finite(x * y, op);
      case Op::kDiv:
        if (y == 0) return InvalidArgument("division by zero");
        return Finite(x / y, op);
      default:
        return Finite(std::pow(x, y), op);  // kPow
    }
  }

  Context& ctx_;
};

}  // namespace

Status Context::Charge(std::size_t units) {
  if (units > kWorkBudget - spent_) {
    spent_ = kWorkBudget;
    return InvalidArgument("evaluation exceeds its work limit");
  }
  spent_ += units;
  return Status::Ok();
}

Result<Value> Context::Take(Slot&& slot) {
  if (!slot.borrowed()) return std::move(slot.owned());
  BATON_RETURN_IF_ERROR(Charge(CopyCost(slot.get())));
  return slot.get();
}

Result<Value> EvaluateTree(const Node& root, Context& ctx) {
  Evaluator evaluator(ctx);
  Result<Slot> slot = evaluator.Eval(root);
  if (!slot.ok()) return slot.status();
  // The result is copied once, uncharged: `{{ tasks.big }}` works however big it is.
  if (slot->borrowed()) return slot->get();
  return std::move(slot->owned());
}

Status CheckLength(std::string_view expression) {
  if (expression.size() <= kMaxExpressionBytes) return Status::Ok();
  return WithExpression(expression,
                        "expression longer than " + std::to_string(kMaxExpressionBytes) + " bytes");
}

Result<Value> EvaluateExpression(std::string_view expression, Context& ctx) {
  try {
    BATON_RETURN_IF_ERROR(CheckLength(expression));
    Result<NodePtr> tree = Parse(expression);
    if (!tree.ok()) return WithExpression(expression, tree.status().message());
    Result<Value> value = EvaluateTree(**tree, ctx);
    if (!value.ok()) return WithExpression(expression, value.status().message());
    return value;
  } catch (const std::exception& e) {
    // Nothing here should throw; this keeps the promise if something still does
    // (std::bad_alloc, or an exception from a user-supplied hook).
    return WithExpression(expression, e.what());
  }
}

std::string_view TrimSpace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const std::size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

Status WithExpression(std::string_view expression, const std::string& message) {
  std::string_view shown = TrimSpace(expression);
  std::string ellipsis;
  if (shown.size() > kMaxQuotedBytes) {
    std::size_t cut = kMaxQuotedBytes;
    // Do not cut a UTF-8 sequence in two.
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
    shown = shown.substr(0, cut);
    ellipsis = "...";
  }
  return InvalidArgument(message + " in \"{{ " + std::string(shown) + ellipsis + " }}\"");
}

}  // namespace baton::expr::internal

namespace baton::expr {

Result<Value> Evaluate(std::string_view expression, const Vars& vars, const EvalOptions& options) {
  internal::Context ctx(vars, options);
  return internal::EvaluateExpression(expression, ctx);
}

Status CheckExpression(std::string_view expression) {
  try {
    BATON_RETURN_IF_ERROR(internal::CheckLength(expression));
    Result<internal::NodePtr> tree = internal::Parse(expression);
    if (!tree.ok()) return internal::WithExpression(expression, tree.status().message());
    return Status::Ok();
  } catch (const std::exception& e) {
    return internal::WithExpression(expression, e.what());
  }
}

}  // namespace baton::expr
