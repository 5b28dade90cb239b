// The built-in functions, the `matches` operator, and value helpers.
#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <system_error>
#include <utility>

#include "expr/internal.h"

namespace baton::expr::internal {

std::string TypeName(const Value& value) {
  switch (value.type()) {
    case Value::value_t::null:
      return "nil";
    case Value::value_t::boolean:
      return "bool";
    case Value::value_t::number_integer:
    case Value::value_t::number_unsigned:
      return "int";
    case Value::value_t::number_float:
      return "float";
    case Value::value_t::string:
      return "string";
    case Value::value_t::array:
      return "list";
    case Value::value_t::object:
      return "map";
    default:
      return "unknown";
  }
}

bool IsInt(const Value& value) {
  if (value.is_number_unsigned()) {
    return value.get<std::uint64_t>() <=
           static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  }
  return value.is_number_integer();
}

bool IsNumber(const Value& value) { return value.is_number(); }

std::int64_t IntOf(const Value& value) {
  if (value.is_number_unsigned()) return static_cast<std::int64_t>(value.get<std::uint64_t>());
  return value.get<std::int64_t>();
}

double FloatOf(const Value& value) {
  if (value.is_number_unsigned()) return static_cast<double>(value.get<std::uint64_t>());
  if (value.is_number_integer()) return static_cast<double>(value.get<std::int64_t>());
  return value.get<double>();
}

std::size_t CodePointLength(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80           ? 1
                        : (c >> 5) == 0x6  ? 2
                        : (c >> 4) == 0xE  ? 3
                        : (c >> 3) == 0x1E ? 4
                                           : 1;
  if (i + n > s.size()) return 1;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

std::size_t CodePointCount(std::string_view s) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.size(); i += CodePointLength(s, i)) ++count;
  return count;
}

std::size_t CodePointOffset(std::string_view s, std::size_t k) {
  std::size_t i = 0;
  for (; k > 0 && i < s.size(); --k) i += CodePointLength(s, i);
  return i;
}

std::size_t MinTextSize(const Value& value) {
  if (value.is_string()) return value.get_ref<const std::string&>().size();
  std::size_t size = 1;
  if (value.is_array()) {
    for (const Value& e : value) size += MinTextSize(e) + 1;
  } else if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it)
      size += it.key().size() + MinTextSize(it.value()) + 3;
  }
  return size;
}

std::size_t FindText(std::string_view haystack, std::string_view needle, std::size_t from) {
  if (from > haystack.size()) return std::string_view::npos;
  if (needle.empty()) return from;
  // Not std::string_view::find, which compares naively and so is quadratic for inputs
  // like repeat('a', n) and repeat('a', n / 2) + 'b'; glibc's memmem is linear (Two-Way).
  const void* at =
      memmem(haystack.data() + from, haystack.size() - from, needle.data(), needle.size());
  if (at == nullptr) return std::string_view::npos;
  return static_cast<std::size_t>(static_cast<const char*>(at) - haystack.data());
}

namespace {

using Args = std::vector<Slot>;

Status TooLong() {
  return InvalidArgument("result longer than " + std::to_string(kMaxStringBytes) + " bytes");
}

// What an error says of a string value: its length, never its text. A value may be a
// secret (or made from one: a slice, a decoding), and the evaluator cannot tell; a quoted
// piece of one would not match the secret whole, so redaction could not hide it. The
// expression itself, which the error quotes, shows what the value was made from.
std::string Described(std::string_view s) {
  return "(a string of " + std::to_string(s.size()) + (s.size() == 1 ? " byte)" : " bytes)");
}

Status WrongArg(std::size_t i, std::string_view want, const Value& got) {
  return InvalidArgument("argument " + std::to_string(i + 1) + " must be " + std::string(want) +
                         ", got " + TypeName(got));
}

Result<std::string_view> StringArg(const Args& args, std::size_t i) {
  if (!args[i]->is_string()) return WrongArg(i, "a string", args[i].get());
  return std::string_view(args[i]->get_ref<const std::string&>());
}

Result<std::int64_t> IntArg(const Args& args, std::size_t i) {
  if (!IsInt(args[i].get())) return WrongArg(i, "an int", args[i].get());
  return IntOf(args[i].get());
}

Status ListArg(const Args& args, std::size_t i) {
  if (!args[i]->is_array()) return WrongArg(i, "a list", args[i].get());
  return Status::Ok();
}

// A new string, counted against the budget.
Result<Value> MakeString(Context& ctx, std::string s) {
  if (s.size() > kMaxStringBytes) return TooLong();
  BATON_RETURN_IF_ERROR(ctx.Charge(s.size() + kElementCost));
  return Value(std::move(s));
}

Result<Value> Sequence(Context& ctx, Args& args) {
  Result<std::int64_t> start = IntArg(args, 0);
  if (!start.ok()) return start.status();
  Result<std::int64_t> stop = IntArg(args, 1);
  if (!stop.ok()) return stop.status();
  Value list = Value::array();
  if (*start >= *stop) return list;
  const std::uint64_t count =
      static_cast<std::uint64_t>(*stop) - static_cast<std::uint64_t>(*start);
  if (count > kMaxSequence) {
    return InvalidArgument("more than " + std::to_string(kMaxSequence) + " elements");
  }
  BATON_RETURN_IF_ERROR(ctx.Charge(count * kElementCost));
  for (std::int64_t i = *start; i < *stop; ++i) list.push_back(i);
  return list;
}

Result<Value> RandomInt(Context& ctx, Args& args) {
  std::int64_t n = std::numeric_limits<std::int64_t>::max();
  if (!args.empty()) {
    Result<std::int64_t> arg = IntArg(args, 0);
    if (!arg.ok()) return arg.status();
    n = *arg;
    if (n <= 0) return InvalidArgument("n must be positive, got " + std::to_string(n));
  }
  std::int64_t r = 0;
  if (ctx.options().random) {
    r = ctx.options().random(n);
    if (r < 0 || r >= n) {
      return InvalidArgument("random source returned " + std::to_string(r) + ", outside [0, " +
                             std::to_string(n) + ")");
    }
  } else {
    thread_local std::mt19937_64 engine{std::random_device{}()};
    r = std::uniform_int_distribution<std::int64_t>(0, n - 1)(engine);
  }
  return Value(r);
}

Result<Value> FromJson(Context& ctx, Args& args) {
  Result<std::string_view> text = StringArg(args, 0);
  if (!text.ok()) return text.status();
  // nlohmann's parser recurses once per level, so deep input is refused before parsing.
  int depth = 0;
  std::size_t elements = 1;  // at most one per `,`, `[` and `{`, plus one
  bool in_string = false;
  for (std::size_t i = 0; i < text->size(); ++i) {
    const char c = (*text)[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return InvalidArgument("input nested too deeply");
      ++elements;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',') {
      ++elements;
    }
  }
  BATON_RETURN_IF_ERROR(ctx.Charge(text->size() + elements * kElementCost));
  try {
    return Value::parse(text->begin(), text->end());
  } catch (const Value::exception& e) {
    // Drop the "[json.exception.parse_error.101] " prefix.
    std::string message = e.what();
    const std::size_t bracket = message.find("] ");
    if (message.starts_with("[json.exception") && bracket != std::string::npos) {
      message.erase(0, bracket + 2);
    }
    // Nor what it read last: a piece of the input (see Described).
    if (const std::size_t read = message.find("; last read: "); read != std::string::npos) {
      message.erase(read);
    }
    return InvalidArgument(message);
  }
}

Result<Value> ToJson(Context& ctx, Args& args) {
  if (MinTextSize(args[0].get()) > kMaxStringBytes) return TooLong();
  return MakeString(ctx, args[0]->dump(-1, ' ', false, Value::error_handler_t::replace));
}

Result<Value> Split(Context& ctx, Args& args) {
  Result<std::string_view> s = StringArg(args, 0);
  if (!s.ok()) return s.status();
  Result<std::string_view> sep = StringArg(args, 1);
  if (!sep.ok()) return sep.status();
  Value list = Value::array();
  auto add = [&](std::string_view piece) {
    // One element of the list, and one string.
    BATON_RETURN_IF_ERROR(ctx.Charge(2 * kElementCost + piece.size()));
    list.push_back(std::string(piece));
    return Status::Ok();
  };
  if (sep->empty()) {  // into code points, as Go's strings.Split
    for (std::size_t i = 0; i < s->size();) {
      const std::size_t n = CodePointLength(*s, i);
      BATON_RETURN_IF_ERROR(add(s->substr(i, n)));
      i += n;
    }
    return list;
  }
  std::size_t from = 0;
  while (true) {
    const std::size_t at = FindText(*s, *sep, from);
    if (at == std::string_view::npos) break;
    BATON_RETURN_IF_ERROR(add(s->substr(from, at - from)));
    from = at + sep->size();
  }
  BATON_RETURN_IF_ERROR(add(s->substr(from)));
  return list;
}

Result<Value> Join(Context& ctx, Args& args) {
  BATON_RETURN_IF_ERROR(ListArg(args, 0));
  std::string_view sep;
  if (args.size() > 1) {
    Result<std::string_view> s = StringArg(args, 1);
    if (!s.ok()) return s.status();
    sep = *s;
  }
  std::string out;
  bool first = true;
  for (const Value& e : args[0].get()) {
    if (!first) out += sep;
    first = false;
    if (out.size() + MinTextSize(e) > kMaxStringBytes) return TooLong();
    out += ToText(e);
    if (out.size() > kMaxStringBytes) return TooLong();
  }
  return MakeString(ctx, std::move(out));
}

Result<Value> Len(Context&, Args& args) {
  const Value& v = args[0].get();
  if (v.is_string()) {
    return Value(static_cast<std::int64_t>(CodePointCount(v.get_ref<const std::string&>())));
  }
  if (v.is_array() || v.is_object()) return Value(static_cast<std::int64_t>(v.size()));
  return WrongArg(0, "a string, list or map", v);
}

template <bool kUpper>
Result<Value> ChangeCase(Context& ctx, Args& args) {
  Result<std::string_view> s = StringArg(args, 0);
  if (!s.ok()) return s.status();
  std::string out(*s);
  // ASCII only: full Unicode case mapping needs tables this library does not carry.
  for (char& c : out) {
    if (kUpper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!kUpper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return MakeString(ctx, std::move(out));
}

Result<Value> Trim(Context& ctx, Args& args) {
  Result<std::string_view> s = StringArg(args, 0);
  if (!s.ok()) return s.status();
  if (args.size() == 1) return MakeString(ctx, std::string(TrimSpace(*s)));
  Result<std::string_view> cutset = StringArg(args, 1);
  if (!cutset.ok()) return cutset.status();
  // Trims whole code points, as Go's strings.Trim: ASCII ones by table, others by search.
  std::array<bool, 128> ascii{};
  std::vector<std::string_view> others;
  for (std::size_t i = 0, n = 0; i < cutset->size(); i += n) {
    n = CodePointLength(*cutset, i);
    const auto c = static_cast<unsigned char>((*cutset)[i]);
    if (c < 128) {
      ascii[c] = true;
    } else {
      others.push_back(cutset->substr(i, n));
    }
  }
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  auto cut = [&](std::size_t i) {
    const auto c = static_cast<unsigned char>((*s)[i]);
    if (c < 128) return ascii[c];
    return std::binary_search(others.begin(), others.end(), s->substr(i, CodePointLength(*s, i)));
  };
  std::size_t begin = 0;
  while (begin < s->size() && cut(begin)) begin += CodePointLength(*s, begin);
  std::size_t end = begin;
  for (std::size_t i = begin; i < s->size(); i += CodePointLength(*s, i)) {
    if (!cut(i)) end = i + CodePointLength(*s, i);
  }
  return MakeString(ctx, std::string(s->substr(begin, end - begin)));
}

// Doubles in [-2^63, 2^63) convert to int64 exactly after truncation.
bool FitsInt(double d) { return d >= -9223372036854775808.0 && d < 9223372036854775808.0; }

Result<Value> Int(Context&, Args& args) {
  const Value& v = args[0].get();
  if (IsInt(v)) return Value(IntOf(v));
  if (v.is_number()) {
    const double d = FloatOf(v);
    if (!FitsInt(d)) return InvalidArgument(ToText(v) + " is out of range");
    return Value(static_cast<std::int64_t>(d));
  }
  if (!v.is_string()) return WrongArg(0, "a number or string", v);
  std::string_view s = v.get_ref<const std::string&>();
  const std::string_view digits = s.substr(!s.empty() && s[0] == '+' ? 1 : 0);
  std::int64_t i = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
  if (ec == std::errc::result_out_of_range) return InvalidArgument("out of range " + Described(s));
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.starts_with("+")) {
    return InvalidArgument("invalid integer " + Described(s));
  }
  return Value(i);
}

Result<Value> Float(Context&, Args& args) {
  const Value& v = args[0].get();
  if (v.is_number()) return Value(FloatOf(v));
  if (!v.is_string()) return WrongArg(0, "a number or string", v);
  std::string_view s = v.get_ref<const std::string&>();
  const std::string_view digits = s.substr(!s.empty() && s[0] == '+' ? 1 : 0);
  double d = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), d);
  if (ec == std::errc::result_out_of_range) return InvalidArgument("out of range " + Described(s));
  // from_chars accepts "inf" and "nan", which are no numbers here.
  if (ec != std::errc() || ptr != digits.data() + digits.size() || !std::isfinite(d) ||
      digits.starts_with("+")) {
    return InvalidArgument("invalid number " + Described(s));
  }
  return Value(d);
}

Result<Value> String(Context& ctx, Args& args) {
  if (MinTextSize(args[0].get()) > kMaxStringBytes) return TooLong();
  return MakeString(ctx, ToText(args[0].get()));
}

template <bool kKeys>
Result<Value> KeysOrValues(Context& ctx, Args& args) {
  if (!args[0]->is_object()) return WrongArg(0, "a map", args[0].get());
  Result<Value> map = ctx.Take(std::move(args[0]));
  if (!map.ok()) return map.status();
  Value list = Value::array();
  for (auto it = map->begin(); it != map->end(); ++it) {
    BATON_RETURN_IF_ERROR(ctx.Charge(kElementCost));
    if (kKeys) {
      BATON_RETURN_IF_ERROR(ctx.Charge(kElementCost + it.key().size()));
      list.push_back(it.key());
    } else {
      list.push_back(std::move(it.value()));
    }
  }
  return list;
}

Result<Value> Now(Context& ctx, Args&) {
  if (ctx.options().now) return MakeString(ctx, ctx.options().now());
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return Value(std::string(buf, n));
}

Result<Value> Abs(Context&, Args& args) {
  const Value& v = args[0].get();
  if (IsInt(v)) {
    const std::int64_t i = IntOf(v);
    if (i == std::numeric_limits<std::int64_t>::min()) return InvalidArgument("integer overflow");
    return Value(i < 0 ? -i : i);
  }
  if (v.is_number()) return Value(std::fabs(FloatOf(v)));
  return WrongArg(0, "a number", v);
}

// min(1, 2, 3) or min([1, 2, 3]); the result keeps its kind (int or float).
template <bool kMax>
Result<Value> MinMax(Context&, Args& args) {
  const bool one_list = args.size() == 1 && args[0]->is_array();
  const std::size_t count = one_list ? args[0]->size() : args.size();
  auto less = [](const Value& a, const Value& b) {
    return IsInt(a) && IsInt(b) ? IntOf(a) < IntOf(b) : FloatOf(a) < FloatOf(b);
  };
  const Value* best = nullptr;
  for (std::size_t i = 0; i < count; ++i) {
    const Value& v = one_list ? args[0].get()[i] : args[i].get();
    if (!v.is_number()) {
      if (!one_list) return WrongArg(i, "a number", v);
      return InvalidArgument("element " + std::to_string(i) + " is " + TypeName(v) +
                             ", not a number");
    }
    if (best == nullptr || (kMax ? less(*best, v) : less(v, *best))) best = &v;
  }
  if (best == nullptr) return InvalidArgument("no values");
  return *best;
}

template <bool kFirst>
Result<Value> FirstOrLast(Context& ctx, Args& args) {
  BATON_RETURN_IF_ERROR(ListArg(args, 0));
  const Value& list = args[0].get();
  if (list.empty()) return Value();
  const Value& e = kFirst ? list.front() : list.back();
  return ctx.Take(Slot::Borrow(e));
}

Result<Value> Reverse(Context& ctx, Args& args) {
  BATON_RETURN_IF_ERROR(ListArg(args, 0));
  Result<Value> list = ctx.Take(std::move(args[0]));
  if (!list.ok()) return list.status();
  std::reverse(list->begin(), list->end());
  return list;
}

// The code-point index of a substring, or the index of a list element; -1 if absent.
Result<Value> IndexOf(Context&, Args& args) {
  if (args[0]->is_array()) {
    const Value& list = args[0].get();
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i] == args[1].get()) return Value(static_cast<std::int64_t>(i));
    }
    return Value(std::int64_t{-1});
  }
  if (!args[0]->is_string()) return WrongArg(0, "a string or list", args[0].get());
  Result<std::string_view> sub = StringArg(args, 1);
  if (!sub.ok()) return sub.status();
  const std::string_view s = args[0]->get_ref<const std::string&>();
  const std::size_t at = FindText(s, *sub);
  if (at == std::string_view::npos) return Value(std::int64_t{-1});
  return Value(static_cast<std::int64_t>(CodePointCount(s.substr(0, at))));
}

Result<Value> Replace(Context& ctx, Args& args) {
  std::string_view parts[3];
  for (std::size_t i = 0; i < 3; ++i) {
    Result<std::string_view> s = StringArg(args, i);
    if (!s.ok()) return s.status();
    parts[i] = *s;
  }
  const auto [s, old, with] = parts;
  std::string out;
  if (old.empty()) {
    // As Go's strings.ReplaceAll: `with` goes before each code point and at the end.
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t n = CodePointLength(s, i);
      out.append(with).append(s.substr(i, n));
      i += n;
      if (out.size() > kMaxStringBytes) return TooLong();
    }
    out.append(with);
    return MakeString(ctx, std::move(out));
  }
  std::size_t from = 0;
  while (true) {
    const std::size_t at = FindText(s, old, from);
    if (at == std::string_view::npos) break;
    out.append(s.substr(from, at - from)).append(with);
    if (out.size() > kMaxStringBytes) return TooLong();
    from = at + old.size();
  }
  out.append(s.substr(from));
  return MakeString(ctx, std::move(out));
}

Result<Value> Repeat(Context& ctx, Args& args) {
  Result<std::string_view> s = StringArg(args, 0);
  if (!s.ok()) return s.status();
  Result<std::int64_t> n = IntArg(args, 1);
  if (!n.ok()) return n.status();
  if (*n < 0) return InvalidArgument("count must not be negative, got " + std::to_string(*n));
  const auto count = static_cast<std::uint64_t>(*n);
  if (!s->empty() && count > kMaxStringBytes / s->size()) return TooLong();
  const std::size_t total = s->size() * count;
  if (total == 0) return MakeString(ctx, "");
  // Doubling: a few large copies instead of `count` small appends.
  std::string out;
  out.reserve(total);
  out.append(*s);
  while (out.size() < total) out.append(out, 0, std::min(out.size(), total - out.size()));
  return MakeString(ctx, std::move(out));
}

template <bool kPrefix>
Result<Value> HasAffix(Context&, Args& args) {
  Result<std::string_view> s = StringArg(args, 0);
  if (!s.ok()) return s.status();
  Result<std::string_view> affix = StringArg(args, 1);
  if (!affix.ok()) return affix.status();
  return Value(kPrefix ? s->starts_with(*affix) : s->ends_with(*affix));
}

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

Result<Value> ToBase64(Context& ctx, Args& args) {
  Result<std::string_view> s = StringArg(args, 0);
  if (!s.ok()) return s.status();
  if ((s->size() + 2) / 3 * 4 > kMaxStringBytes) return TooLong();
  std::string out;
  for (std::size_t i = 0; i < s->size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, s->size() - i);
    std::uint32_t chunk = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      chunk = chunk << 8 | (k < n ? static_cast<unsigned char>((*s)[i + k]) : 0u);
    }
    for (std::size_t k = 0; k < 4; ++k) {
      out += k <= n ? kBase64[(chunk >> (18 - 6 * k)) & 0x3F] : '=';
    }
  }
  return MakeString(ctx, std::move(out));
}

Result<Value> FromBase64(Context& ctx, Args& args) {
  Result<std::string_view> s = StringArg(args, 0);
  if (!s.ok()) return s.status();
  // Standard encoding with padding, as Go's base64.StdEncoding.
  if (s->size() % 4 != 0)
    return InvalidArgument("invalid base64 length " + std::to_string(s->size()));
  std::string out;
  for (std::size_t i = 0; i < s->size(); i += 4) {
    std::uint32_t chunk = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = (*s)[i + k];
      const bool last_block = i + 4 == s->size();
      if (c == '=' && last_block && k >= 2 && (k == 3 || (*s)[i + 3] == '=')) {
        ++pad;
        chunk <<= 6;
        continue;
      }
      const std::size_t d = kBase64.find(c);
      if (d == std::string_view::npos || pad > 0) {
        return InvalidArgument("illegal base64 data at input byte " + std::to_string(i + k));
      }
      chunk = chunk << 6 | static_cast<std::uint32_t>(d);
    }
    for (int k = 0; k < 3 - pad; ++k) out += static_cast<char>((chunk >> (16 - 8 * k)) & 0xFF);
  }
  return MakeString(ctx, std::move(out));
}

constexpr std::array kFunctions = {
    Function{"abs", 1, 1, Abs},
    Function{"first", 1, 1, FirstOrLast<true>},
    Function{"float", 1, 1, Float},
    Function{"fromBase64", 1, 1, FromBase64},
    Function{"fromJSON", 1, 1, FromJson},
    Function{"hasPrefix", 2, 2, HasAffix<true>},
    Function{"hasSuffix", 2, 2, HasAffix<false>},
    Function{"indexOf", 2, 2, IndexOf},
    Function{"int", 1, 1, Int},
    Function{"join", 1, 2, Join},
    Function{"keys", 1, 1, KeysOrValues<true>},
    Function{"last", 1, 1, FirstOrLast<false>},
    Function{"len", 1, 1, Len},
    Function{"lower", 1, 1, ChangeCase<false>},
    Function{"max", 1, -1, MinMax<true>},
    Function{"min", 1, -1, MinMax<false>},
    Function{"now", 0, 0, Now},
    Function{"randomInt", 0, 1, RandomInt},
    Function{"repeat", 2, 2, Repeat},
    Function{"replace", 3, 3, Replace},
    Function{"reverse", 1, 1, Reverse},
    Function{"sequence", 2, 2, Sequence},
    Function{"split", 2, 2, Split},
    Function{"string", 1, 1, String},
    Function{"toBase64", 1, 1, ToBase64},
    Function{"toJSON", 1, 1, ToJson},
    Function{"trim", 1, 2, Trim},
    Function{"upper", 1, 1, ChangeCase<true>},
    Function{"values", 1, 1, KeysOrValues<false>},
};

// ---- Regular expressions ------------------------------------------------------------
//
// std::regex backtracks (exponential time, and recursion per subject byte that overflows
// the stack on long subjects). libstdc++'s "polynomial" mode runs a Thompson NFA instead,
// whose time is O(subject × NFA states) and whose recursion depth is bounded by the NFA.
// So the NFA size is estimated up front and capped, and so is subject × size. Like Go's
// RE2 (which expr-lang uses) there are no backreferences and no lookaheads.

constexpr std::size_t kMaxPatternBytes = 1000;
constexpr std::size_t kMaxSubjectBytes = 64 << 10;
constexpr std::size_t kMaxPatternCost = 2000;
// Subject bytes × pattern cost, a bound on NFA steps. A step costs as much as copying
// kMatchStepCost bytes, so one match may use most of the work budget.
constexpr std::size_t kMaxMatchWork = std::size_t{1} << 20;
constexpr std::size_t kMatchStepCost = 64;
constexpr std::size_t kSaturated = std::size_t{1} << 40;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::size_t SatAdd(std::size_t a, std::size_t b) { return std::min(a + b, kSaturated); }
std::size_t SatMul(std::size_t a, std::size_t b) {
  return a != 0 && b > kSaturated / a ? kSaturated : std::min(a * b, kSaturated);
}

// Estimates the NFA states `pattern` compiles to (counted repetitions copy their operand).
Result<std::size_t> PatternCost(std::string_view p) {
  struct Level {
    std::size_t sum = 0;
    std::size_t last = 0;  // cost of the latest atom, which a quantifier repeats
  };
  std::vector<Level> levels(1);
  auto atom = [&](std::size_t cost) {
    levels.back().sum = SatAdd(levels.back().sum, cost);
    levels.back().last = cost;
  };
  bool quantified = false;  // the previous token was a quantifier
  for (std::size_t i = 0; i < p.size();) {
    const char c = p[i];
    const bool lazy = c == '?' && quantified;  // `a*?`: lazy, no state of its own
    quantified = false;
    if (c == '\\') {
      if (i + 1 < p.size() && p[i + 1] >= '1' && p[i + 1] <= '9') {
        return InvalidArgument("backreferences are not supported");
      }
      atom(1);
      i += 2;
    } else if (c == '[') {
      std::size_t j = i + 1;
      while (j < p.size() && p[j] != ']') j += p[j] == '\\' ? 2 : 1;
      atom(2);
      i = j + 1;
    } else if (c == '(') {
      if (p.substr(i, 3) == "(?=" || p.substr(i, 3) == "(?!") {
        return InvalidArgument("lookaheads are not supported");
      }
      if (levels.size() > static_cast<std::size_t>(kMaxDepth))
        return InvalidArgument("pattern too complex");
      levels.emplace_back();
      i += p.substr(i, 3) == "(?:" ? 3 : 1;
    } else if (c == ')') {
      if (levels.size() == 1) return InvalidArgument("unmatched \")\"");
      const std::size_t group = levels.back().sum + 2;
      levels.pop_back();
      atom(group);
      ++i;
    } else if (c == '{') {
      // libstdc++ reads repetition counts into a long without overflow checks.
      for (std::size_t j = i + 1, run = 0; j < p.size() && (IsDigit(p[j]) || p[j] == ','); ++j) {
        run = p[j] == ',' ? 0 : run + 1;
        if (run > 6) return InvalidArgument("repetition count too large");
      }
      // {n}, {n,} or {n,m}: the operand is copied max(n, m) times (n+1 when open).
      std::size_t j = i + 1;
      auto number = [&](std::size_t& out) {
        const std::size_t from = j;
        for (out = 0; j < p.size() && IsDigit(p[j]); ++j) {
          out = SatAdd(SatMul(out, 10), static_cast<std::size_t>(p[j] - '0'));
        }
        return j > from;
      };
      std::size_t lo = 0, hi = 0;
      const bool valid = number(lo);
      hi = lo;
      if (valid && j < p.size() && p[j] == ',') {
        ++j;
        if (!number(hi)) hi = SatAdd(lo, 1);
      }
      if (!valid || j >= p.size() || p[j] != '}') {
        atom(1);  // not a repetition; std::regex decides whether it is valid
        ++i;
        continue;
      }
      if (levels.back().last == 0) return InvalidArgument("nothing to repeat");
      const std::size_t copies = std::max<std::size_t>({1, lo, hi});
      levels.back().sum = SatAdd(levels.back().sum, SatMul(levels.back().last, copies));
      levels.back().last = 0;
      i = j + 1;
      quantified = true;
    } else if (lazy) {
      ++i;
    } else if (c == '*' || c == '+' || c == '?') {
      if (levels.back().last == 0) return InvalidArgument("nothing to repeat");
      levels.back().sum = SatAdd(levels.back().sum, 1);
      levels.back().last = 0;
      ++i;
      quantified = true;
    } else if (c == '|') {
      levels.back().sum = SatAdd(levels.back().sum, 1);
      levels.back().last = 0;
      ++i;
    } else {
      atom(1);
      ++i;
    }
  }
  if (levels.size() > 1) return InvalidArgument("missing \")\"");
  return levels[0].sum;
}

std::string_view RegexErrorText(std::regex_constants::error_type code) {
  namespace rc = std::regex_constants;
  if (code == rc::error_collate) return "invalid collating element";
  if (code == rc::error_ctype) return "invalid character class";
  if (code == rc::error_escape) return "invalid escape";
  if (code == rc::error_backref) return "backreferences are not supported";
  if (code == rc::error_brack) return "mismatched \"[\"";
  if (code == rc::error_paren) return "mismatched parentheses";
  if (code == rc::error_brace) return "mismatched \"{\"";
  if (code == rc::error_badbrace) return "invalid repetition count";
  if (code == rc::error_range) return "invalid character range";
  if (code == rc::error_badrepeat) return "nothing to repeat";
  return "pattern too complex";  // error_space, error_complexity, error_stack
}

}  // namespace

const Function* FindFunction(std::string_view name) {
  for (const Function& f : kFunctions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Result<bool> RegexMatches(Context& ctx, std::string_view subject, std::string_view pattern) {
  auto invalid = [](std::string_view why) {
    return InvalidArgument("invalid regular expression: " + std::string(why));
  };
  if (pattern.size() > kMaxPatternBytes) {
    return invalid("longer than " + std::to_string(kMaxPatternBytes) + " bytes");
  }
  if (subject.size() > kMaxSubjectBytes) {
    return InvalidArgument("matches: subject longer than " + std::to_string(kMaxSubjectBytes) +
                           " bytes");
  }
  Result<std::size_t> cost = PatternCost(pattern);
  if (!cost.ok()) return invalid(cost.status().message());
  if (*cost > kMaxPatternCost) return invalid("pattern too complex");
  if (SatMul(*cost + 1, subject.size()) > kMaxMatchWork) {
    return InvalidArgument("matches: pattern too complex for a subject of " +
                           std::to_string(subject.size()) + " bytes");
  }
  BATON_RETURN_IF_ERROR(ctx.Charge(SatMul(SatMul(*cost + 1, subject.size() + 1), kMatchStepCost)));
  try {
    auto flags = std::regex::ECMAScript | std::regex::nosubs;
#if defined(__GLIBCXX__)
    flags |= std::regex_constants::__polynomial;
#endif
    // Compiled alone first, so that errors are about the pattern, not the wrapper below
    // (a trailing `\` would escape its `)`).
    std::regex check(pattern.begin(), pattern.end(), flags);
    // An unanchored search as one NFA pass: regex_search would restart at every
    // position (quadratic). `^`, `$` and `\b` still see the whole subject.
    const std::string wrapped = "[\\s\\S]*?(?:" + std::string(pattern) + ")[\\s\\S]*";
    std::regex re(wrapped, flags);
    return std::regex_match(subject.begin(), subject.end(), re);
  } catch (const std::regex_error& e) {
    return invalid(RegexErrorText(e.code()));
  }
}

}  // namespace baton::expr::internal
