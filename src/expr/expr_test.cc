// Tests of expressions: each operator, each function, errors and limits.
#include "expr/expr.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace baton::expr {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

const Value& Vars() {
  static const Value vars = Value::parse(R"({
    "inputs": {"who": "world", "n": 5, "list": [1, 2, 3], "nested": {"deep": {"x": "y"}},
               "huge": 18446744073709551615},
    "secrets": {"token": "s3cret"},
    "tasks": {"greeting": "hello"},
    "job": {"id": "j-1", "name": "demo"},
    "item": {"index": 0, "value": 1}
  })");
  return vars;
}

// Pins the non-deterministic functions: randomInt(n) yields n - 1.
EvalOptions Pinned() {
  EvalOptions options;
  options.random = [](std::int64_t n) { return n - 1; };
  options.now = [] { return std::string("2024-05-06T07:08:09Z"); };
  return options;
}

Value Eval(std::string_view expression) {
  Result<Value> result = Evaluate(expression, Vars(), Pinned());
  EXPECT_TRUE(result.ok()) << expression << ": " << result.status().message();
  return result.ok() ? *result : Value("<error>");
}

// The message of the error `expression` must fail with.
std::string Error(std::string_view expression) {
  Result<Value> result = Evaluate(expression, Vars(), Pinned());
  EXPECT_FALSE(result.ok()) << expression << " gave " << (result.ok() ? result->dump() : "");
  if (result.ok()) return "<no error>";
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  return result.status().message();
}

// The expected message for `expression`: `what in "{{ expression }}"`.
std::string In(std::string_view what, std::string_view expression) {
  return std::string(what) + " in \"{{ " + std::string(expression) + " }}\"";
}

void ExpectInt(std::string_view expression, std::int64_t want) {
  const Value v = Eval(expression);
  EXPECT_TRUE(v.is_number_integer()) << expression << " gave " << v.dump();
  EXPECT_EQ(v, Value(want)) << expression;
}

void ExpectFloat(std::string_view expression, double want) {
  const Value v = Eval(expression);
  EXPECT_TRUE(v.is_number_float()) << expression << " gave " << v.dump();
  if (v.is_number_float()) {
    EXPECT_DOUBLE_EQ(v.get<double>(), want) << expression;
  }
}

void ExpectBool(std::string_view expression, bool want) {
  const Value v = Eval(expression);
  EXPECT_TRUE(v.is_boolean()) << expression << " gave " << v.dump();
  EXPECT_EQ(v, Value(want)) << expression;
}

void ExpectJson(std::string_view expression, std::string_view json) {
  EXPECT_EQ(Eval(expression).dump(), json) << expression;
}

// ---- Literals ----------------------------------------------------------------------

TEST(ExprVarsTest, TheOverObjectShadowsTheBaseAndEitherIsFound) {
  const Value base = {{"inputs", {{"who", "base"}}}, {"item", "from base"}};
  const Value over = {{"item", {{"index", 3}}}};
  const class Vars vars(base, over);  // (the class: this file has a Vars() of its own)
  EXPECT_EQ(*Evaluate("item.index", vars), 3);
  EXPECT_EQ(*Evaluate("inputs.who", vars), "base");
  EXPECT_EQ(*Evaluate("item", base), "from base");
  EXPECT_EQ(vars.Find("nothing"), nullptr);
  Result<Value> unknown = Evaluate("nothing", vars);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown name nothing"));
}

TEST(ExprLiteralTest, IntegersInDecimalHexOctalBinaryAndWithSeparators) {
  ExpectInt("42", 42);
  ExpectInt("0x1F", 31);
  ExpectInt("0o17", 15);
  ExpectInt("0b101", 5);
  ExpectInt("1_000_000", 1000000);
  ExpectInt("9223372036854775807", std::numeric_limits<std::int64_t>::max());
}

TEST(ExprLiteralTest, Floats) {
  ExpectFloat("1.5", 1.5);
  ExpectFloat("1e3", 1000);
  ExpectFloat("2.5e-1", 0.25);
  ExpectFloat("1E+2", 100);
  ExpectFloat("1_000.5", 1000.5);
}

TEST(ExprLiteralTest, IntegerOutOfRangeIsAnError) {
  EXPECT_EQ(Error("99999999999999999999"),
            In("syntax error at offset 0: number too large", "99999999999999999999"));
  EXPECT_EQ(Error("1 + 9223372036854775808"),
            In("syntax error at offset 4: number too large", "1 + 9223372036854775808"));
  EXPECT_EQ(Error("1e999"), In("syntax error at offset 0: number out of range", "1e999"));
}

TEST(ExprLiteralTest, MinimumIntegerIsAcceptedNegated) {
  ExpectInt("-9223372036854775808", std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(Error("-9223372036854775808 - 1"),
            In("integer overflow in -", "-9223372036854775808 - 1"));
}

TEST(ExprLiteralTest, MalformedNumbersAreSyntaxErrors) {
  EXPECT_EQ(Error("1abc"), In("syntax error at offset 0: invalid number", "1abc"));
  EXPECT_EQ(Error("0x"), In("syntax error at offset 0: invalid number", "0x"));
  EXPECT_EQ(Error("1__0"), In("syntax error at offset 0: invalid number", "1__0"));
  EXPECT_EQ(Error("1_"), In("syntax error at offset 0: invalid number", "1_"));
  EXPECT_EQ(Error("0x1G"), In("syntax error at offset 0: invalid number", "0x1G"));
}

TEST(ExprLiteralTest, StringsWithEscapes) {
  EXPECT_EQ(Eval("'single'"), "single");
  EXPECT_EQ(Eval(R"("double")"), "double");
  EXPECT_EQ(Eval(R"("a\nb\tc\\d\'e\"f")"), "a\nb\tc\\d'e\"f");
  EXPECT_EQ(Eval(R"('\u00e9\u20AC')"), "\u00e9\u20ac");
  EXPECT_EQ(Eval(R"("\uD83D\uDE00")"), "\U0001F600");
  EXPECT_EQ(Eval(R"(`raw \n`)"), "raw \\n");
}

TEST(ExprLiteralTest, BadEscapesAndUnterminatedStringsAreSyntaxErrors) {
  EXPECT_EQ(Error(R"("a\qb")"), In(R"(syntax error at offset 2: invalid escape \q)", R"("a\qb")"));
  EXPECT_EQ(Error(R"("\u12")"), In(R"(syntax error at offset 1: invalid \u escape)", R"("\u12")"));
  EXPECT_EQ(Error(R"("\uD800")"),
            In(R"(syntax error at offset 1: invalid surrogate pair in \u escape)", R"("\uD800")"));
  EXPECT_EQ(Error("'abc"), In("syntax error at offset 0: unterminated string", "'abc"));
}

TEST(ExprLiteralTest, BoolsAndNil) {
  ExpectBool("true", true);
  ExpectBool("false", false);
  EXPECT_TRUE(Eval("nil").is_null());
}

TEST(ExprLiteralTest, ListsAndMaps) {
  ExpectJson(R"([1, "a", [2.5], nil])", R"([1,"a",[2.5],null])");
  ExpectJson(R"({a: 1, "b c": [2], in: true})", R"({"a":1,"b c":[2],"in":true})");
  ExpectJson("[1, 2,]", "[1,2]");
  ExpectJson("{a: 1,}", R"({"a":1})");
  ExpectJson("[]", "[]");
  ExpectJson("{}", "{}");
}

// ---- Arithmetic --------------------------------------------------------------------

TEST(ExprArithmeticTest, IntegerAdditionSubtractionAndMultiplicationStayIntegers) {
  ExpectInt("1 + 2", 3);
  ExpectInt("10 - 15", -5);
  ExpectInt("6 * 7", 42);
  ExpectInt("inputs.n + 1", 6);  // unsigned in parsed JSON still counts as an int
}

TEST(ExprArithmeticTest, MixingIntAndFloatYieldsFloat) {
  ExpectFloat("1 + 0.5", 1.5);
  ExpectFloat("2.5 - 1", 1.5);
  ExpectFloat("2 * 1.5", 3);
  ExpectFloat("inputs.huge + 0", 18446744073709551615.0);
}

TEST(ExprArithmeticTest, DivisionAlwaysYieldsFloat) {
  ExpectFloat("5 / 2", 2.5);
  ExpectFloat("4 / 2", 2);
  ExpectFloat("1 / 4.0", 0.25);
}

TEST(ExprArithmeticTest, DivisionByZeroIsAnError) {
  EXPECT_EQ(Error("1 / 0"), "division by zero in \"{{ 1 / 0 }}\"");
  EXPECT_EQ(Error("1 / 0.0"), In("division by zero", "1 / 0.0"));
  EXPECT_EQ(Error("5 % 0"), In("division by zero", "5 % 0"));
}

TEST(ExprArithmeticTest, ModuloTakesIntegersOnly) {
  ExpectInt("7 % 3", 1);
  ExpectInt("-7 % 3", -1);
  ExpectInt("-9223372036854775808 % -1", 0);
  EXPECT_EQ(Error("1.5 % 1"),
            In("invalid operation: % (mismatched types float and int)", "1.5 % 1"));
}

TEST(ExprArithmeticTest, PowerYieldsFloatAndIsRightAssociative) {
  ExpectFloat("2 ** 10", 1024);
  ExpectFloat("2 ^ 3", 8);
  ExpectFloat("2 ** 3 ** 2", 512);
  ExpectFloat("4 ** -1", 0.25);
}

TEST(ExprArithmeticTest, IntegerOverflowIsAnError) {
  EXPECT_EQ(Error("9223372036854775807 + 1"),
            In("integer overflow in +", "9223372036854775807 + 1"));
  EXPECT_EQ(Error("-9223372036854775807 - 2"),
            In("integer overflow in -", "-9223372036854775807 - 2"));
  EXPECT_EQ(Error("4611686018427387904 * 2"),
            In("integer overflow in *", "4611686018427387904 * 2"));
  EXPECT_EQ(Error("-(-9223372036854775808)"),
            In("integer overflow in -", "-(-9223372036854775808)"));
}

TEST(ExprArithmeticTest, NonFiniteFloatResultIsAnError) {
  EXPECT_EQ(Error("1e308 * 10"), In("result of * is not a finite number", "1e308 * 10"));
  EXPECT_EQ(Error("(-8) ** 0.5"), In("result of ** is not a finite number", "(-8) ** 0.5"));
  EXPECT_EQ(Error("0 ** -1"), In("result of ** is not a finite number", "0 ** -1"));
}

TEST(ExprArithmeticTest, PlusConcatenatesStringsAndLists) {
  EXPECT_EQ(Eval(R"("a" + 'b')"), "ab");
  ExpectJson("[1] + [2, 3]", "[1,2,3]");
  ExpectJson("inputs.list + inputs.list", "[1,2,3,1,2,3]");
}

TEST(ExprArithmeticTest, WrongOperandTypesNameBothTypes) {
  EXPECT_EQ(Error(R"("a" + 1)"),
            In("invalid operation: + (mismatched types string and int)", R"("a" + 1)"));
  EXPECT_EQ(Error(R"("a" - "b")"),
            In("invalid operation: - (mismatched types string and string)", R"("a" - "b")"));
  EXPECT_EQ(Error("[1] * 2"),
            In("invalid operation: * (mismatched types list and int)", "[1] * 2"));
  EXPECT_EQ(Error("nil / 1"), In("invalid operation: / (mismatched types nil and int)", "nil / 1"));
}

TEST(ExprArithmeticTest, UnaryMinusAndPlus) {
  ExpectInt("-(3)", -3);
  ExpectFloat("-2.5", -2.5);
  ExpectInt("+4", 4);
  ExpectInt("- -4", 4);
  EXPECT_EQ(Error(R"(-"a")"), In("invalid operation: - on string (need a number)", R"(-"a")"));
  EXPECT_EQ(Error("+true"), In("invalid operation: + on bool (need a number)", "+true"));
}

// ---- Precedence --------------------------------------------------------------------

TEST(ExprPrecedenceTest, MultiplicationBindsTighterThanAddition) {
  ExpectInt("1 + 2 * 3", 7);
  ExpectInt("(1 + 2) * 3", 9);
  ExpectInt("10 - 4 % 3", 9);
}

TEST(ExprPrecedenceTest, BinaryOperatorsAreLeftAssociative) {
  ExpectInt("10 - 3 - 2", 5);
  ExpectFloat("100 / 10 / 5", 2);
}

TEST(ExprPrecedenceTest, PowerBindsTighterThanUnaryMinus) {
  ExpectFloat("-2 ** 2", -4);
  ExpectFloat("(-2) ** 2", 4);
  ExpectFloat("2 * 3 ** 2", 18);
}

TEST(ExprPrecedenceTest, NotBindsTighterThanComparisonAndLogic) {
  ExpectBool("not true == false", true);  // (not true) == false
  ExpectBool("!false && false", false);
  ExpectBool("not false or false", true);
}

TEST(ExprPrecedenceTest, AndBindsTighterThanOr) {
  ExpectBool("true or false and false", true);
  ExpectBool("false and false or true", true);
  ExpectBool("true || false && false", true);
}

TEST(ExprPrecedenceTest, ComparisonBindsLooserThanArithmetic) {
  ExpectBool("1 + 1 == 2", true);
  ExpectBool("2 * 3 > 5 and 1 < 2", true);
}

TEST(ExprPrecedenceTest, RangeBindsBetweenComparisonAndAddition) {
  ExpectJson("1..1 + 2", "[1,2,3]");
  ExpectBool("2 in 1..3", true);
}

TEST(ExprPrecedenceTest, NilCoalescingBindsTighterThanArithmetic) {
  ExpectInt("nil ?? 1 + 1", 2);
  ExpectInt("inputs.missing ?? 2 * 3", 6);
  ExpectFloat("nil ?? 2 ** 2", 4);
}

TEST(ExprPrecedenceTest, TernaryBindsLoosest) {
  ExpectInt("1 < 2 ? 1 + 1 : 2 + 2", 2);
  ExpectInt("false or true ? 1 : 2", 1);
}

// ---- Comparison --------------------------------------------------------------------

TEST(ExprComparisonTest, EqualityIsDeepAndAcrossNumberKinds) {
  ExpectBool("1 == 1.0", true);
  ExpectBool("[1, {a: 2}] == [1.0, {a: 2}]", true);
  ExpectBool(R"("a" == 'a')", true);
  ExpectBool(R"(1 != "1")", true);
  ExpectBool("nil == nil", true);
  ExpectBool("{a: 1} != {a: 2}", true);
  ExpectBool("inputs.missing == nil", true);
}

TEST(ExprComparisonTest, OrderingComparesNumbersOfEitherKind) {
  ExpectBool("1 < 1.5", true);
  ExpectBool("2 >= 2.0", true);
  ExpectBool("3 <= 2", false);
  ExpectBool("-1 > -2", true);
  ExpectBool("9223372036854775807 > 9223372036854775806", true);
}

TEST(ExprComparisonTest, StringsOrderLexicographically) {
  ExpectBool(R"("abc" < "abd")", true);
  ExpectBool(R"("B" < "a")", true);
  ExpectBool(R"("b" <= "b")", true);
  ExpectBool(R"("ab" > "a")", true);
}

TEST(ExprComparisonTest, OrderingIncompatibleTypesNamesBothTypes) {
  EXPECT_EQ(Error(R"(1 < "a")"),
            In("invalid operation: < (mismatched types int and string)", R"(1 < "a")"));
  EXPECT_EQ(Error("[1] > [0]"),
            In("invalid operation: > (mismatched types list and list)", "[1] > [0]"));
  EXPECT_EQ(Error("nil <= 1.5"),
            In("invalid operation: <= (mismatched types nil and float)", "nil <= 1.5"));
  EXPECT_EQ(Error("true >= false"),
            In("invalid operation: >= (mismatched types bool and bool)", "true >= false"));
}

// ---- Logic -------------------------------------------------------------------------

TEST(ExprLogicTest, AndOrNotInBothSpellings) {
  ExpectBool("true and false", false);
  ExpectBool("true && true", true);
  ExpectBool("false or true", true);
  ExpectBool("false || false", false);
  ExpectBool("not true", false);
  ExpectBool("!false", true);
  ExpectBool("!!true", true);
}

TEST(ExprLogicTest, AndAndOrShortCircuit) {
  ExpectBool("false and (1/0 == 1)", false);
  ExpectBool("true or (1/0 == 1)", true);
  ExpectBool("false && nobody", false);
  ExpectBool("true || nobody", true);
}

TEST(ExprLogicTest, LogicalOperatorsRequireBools) {
  EXPECT_EQ(Error("1 and true"), In("invalid operation: and on int (need bool)", "1 and true"));
  EXPECT_EQ(Error(R"(false || "x")"),
            In("invalid operation: or on string (need bool)", R"(false || "x")"));
  EXPECT_EQ(Error("not nil"), In("invalid operation: not on nil (need bool)", "not nil"));
}

// ---- Membership and string operators -----------------------------------------------

TEST(ExprMembershipTest, InFindsListElementsAndMapKeys) {
  ExpectBool("2 in [1, 2]", true);
  ExpectBool("2.0 in [1, 2]", true);
  ExpectBool("[1] in [[1], [2]]", true);
  ExpectBool(R"("who" in inputs)", true);
  ExpectBool(R"("x" in inputs)", false);
  ExpectBool("1 in nil", false);
  ExpectBool("4 not in [1, 2]", true);
  ExpectBool(R"("who" not in inputs)", false);
}

TEST(ExprMembershipTest, InOnAStringOrWithANonStringKeyIsATypeError) {
  EXPECT_EQ(Error(R"("a" in "abc")"),
            In("invalid operation: in (mismatched types string and string)", R"("a" in "abc")"));
  EXPECT_EQ(Error("1 in {a: 1}"),
            In("invalid operation: in (mismatched types int and map)", "1 in {a: 1}"));
  EXPECT_EQ(Error("1 not in 2"),
            In("invalid operation: not in (mismatched types int and int)", "1 not in 2"));
}

TEST(ExprStringOperatorTest, ContainsStartsWithEndsWith) {
  ExpectBool(R"("abc" contains "b")", true);
  ExpectBool(R"("abc" contains "x")", false);
  ExpectBool(R"("abc" startsWith "ab")", true);
  ExpectBool(R"("abc" startsWith "b")", false);
  ExpectBool(R"("abc" endsWith "bc")", true);
  ExpectBool(R"("abc" endsWith "abcd")", false);
  ExpectBool(R"(tasks.greeting contains "ell")", true);
}

TEST(ExprStringOperatorTest, StringOperatorsRequireStrings) {
  EXPECT_EQ(
      Error(R"(1 contains "a")"),
      In("invalid operation: contains (mismatched types int and string)", R"(1 contains "a")"));
  EXPECT_EQ(Error(R"("a" startsWith nil)"),
            In("invalid operation: startsWith (mismatched types string and nil)",
               R"("a" startsWith nil)"));
  EXPECT_EQ(Error("[] endsWith []"),
            In("invalid operation: endsWith (mismatched types list and list)", "[] endsWith []"));
  EXPECT_EQ(Error(R"(1 matches "a")"),
            In("invalid operation: matches (mismatched types int and string)", R"(1 matches "a")"));
}

TEST(ExprMatchesTest, SearchesAnywhereInTheString) {
  ExpectBool(R"("abc" matches "b")", true);
  ExpectBool(R"("abc" matches "^b")", false);
  ExpectBool(R"("abc" matches "^a.c$")", true);
  ExpectBool(R"("a1" matches "\\d$")", true);
  ExpectBool(R"("say hi" matches "\\bhi")", true);
  ExpectBool(R"("chi" matches "\\bhi")", false);
  ExpectBool(R"("line1\nline2" matches "^line2")", false);
  ExpectBool(R"("" matches "")", true);
  ExpectBool(R"("ab" matches "a|x")", true);
}

TEST(ExprMatchesTest, InvalidPatternIsAnError) {
  EXPECT_EQ(Error(R"x("a" matches "(")x"),
            In(R"x(invalid regular expression: missing ")")x", R"x("a" matches "(")x"));
  EXPECT_EQ(Error(R"x("a" matches ")")x"),
            In(R"x(invalid regular expression: unmatched ")")x", R"x("a" matches ")")x"));
  EXPECT_EQ(Error(R"("a" matches "a**")"),
            In("invalid regular expression: nothing to repeat", R"("a" matches "a**")"));
  EXPECT_EQ(Error(R"x("a" matches "(|{2})")x"),
            In("invalid regular expression: nothing to repeat", R"x("a" matches "(|{2})")x"));
  EXPECT_EQ(Error(R"("a" matches "a*??")"),
            In("invalid regular expression: nothing to repeat", R"("a" matches "a*??")"));
  EXPECT_EQ(Error(R"("a" matches "a\\")"),
            In("invalid regular expression: invalid escape", R"("a" matches "a\\")"));
  ExpectBool(R"("aaa" matches "^a+?a*?a??$")", true);
  ExpectBool(R"("aaa" matches "^(?:a{1,2}){2}$")", true);
  EXPECT_EQ(Error(R"("a" matches "[a")"),
            In(R"(invalid regular expression: mismatched "[")", R"("a" matches "[a")"));
  EXPECT_EQ(Error(R"("a" matches "*")"),
            In("invalid regular expression: nothing to repeat", R"("a" matches "*")"));
}

TEST(ExprMatchesTest, BackreferencesAndLookaheadsAreNotSupported) {
  EXPECT_EQ(Error(R"("aa" matches "(a)\\1")"),
            In("invalid regular expression: backreferences are not supported",
               R"("aa" matches "(a)\\1")"));
  EXPECT_EQ(
      Error(R"x("aa" matches "a(?=a)")x"),
      In("invalid regular expression: lookaheads are not supported", R"x("aa" matches "a(?=a)")x"));
}

TEST(ExprMatchesTest, PatternAndSubjectSizesAreCapped) {
  EXPECT_THAT(Error(R"("a" matches repeat("a", 1001))"),
              StartsWith("invalid regular expression: longer than 1000 bytes in"));
  EXPECT_THAT(Error(R"(repeat("a", 65537) matches "a")"),
              StartsWith("matches: subject longer than 65536 bytes in"));
  ExpectBool(R"(repeat("a", 65536) matches "b")", false);
}

TEST(ExprMatchesTest, PatternsTooComplexAreRefused) {
  EXPECT_THAT(Error(R"("a" matches "((a{100}){100}){100}")"),
              StartsWith("invalid regular expression: pattern too complex in"));
  EXPECT_THAT(Error(R"(repeat("a", 8000) matches "a{1990}b")"),
              StartsWith("matches: pattern too complex for a subject of 8000 bytes in"));
}

// Found by the fuzzer: libstdc++ overflowed a long while reading the count (UBSan).
TEST(ExprMatchesTest, HugeRepetitionCountsAreRefusedBeforeCompiling) {
  EXPECT_EQ(Error("'a' matches 'd{0100000000000000000000007,3}'"),
            In("invalid regular expression: repetition count too large",
               "'a' matches 'd{0100000000000000000000007,3}'"));
  EXPECT_EQ(Error("'a' matches 'a{1,99999999999999999999}'"),
            In("invalid regular expression: repetition count too large",
               "'a' matches 'a{1,99999999999999999999}'"));
  EXPECT_EQ(Error("'a' matches '[\\\\12345678901234567890123]'"),
            In(R"(invalid regular expression: mismatched "[")",
               "'a' matches '[\\\\12345678901234567890123]'"));
}

TEST(ExprMatchesTest, CatastrophicBacktrackingPatternsFinishQuickly) {
  ExpectBool(R"(repeat("a", 5000) matches "(a*)*b")", false);
  ExpectBool(R"(repeat("a", 5000) matches "(a|aa)*c")", false);
  ExpectBool(R"(repeat("a", 60000) matches "a*b")", false);
  ExpectBool(R"(repeat("a", 60000) matches "a$")", true);
}

// ---- Range, ternary and nil coalescing ---------------------------------------------

TEST(ExprRangeTest, RangeIsInclusive) {
  ExpectJson("1..3", "[1,2,3]");
  ExpectJson("2..2", "[2]");
  ExpectJson("3..1", "[]");
  ExpectJson("-1..1", "[-1,0,1]");
}

TEST(ExprRangeTest, RangeIsCappedAndNeedsIntegers) {
  EXPECT_EQ(Error("0..1000000"),
            In("range 0..1000000 has more than 1000000 elements", "0..1000000"));
  EXPECT_EQ(Error("-9223372036854775808..9223372036854775807"),
            In("range -9223372036854775808..9223372036854775807 has more than 1000000 elements",
               "-9223372036854775808..9223372036854775807"));
  EXPECT_EQ(Error("1..2.5"),
            In("invalid operation: .. (mismatched types int and float)", "1..2.5"));
  ExpectJson("9223372036854775806..9223372036854775807",
             "[9223372036854775806,9223372036854775807]");
}

TEST(ExprConditionalTest, PicksABranchAndNestsToTheRight) {
  ExpectInt("true ? 1 : 2", 1);
  ExpectInt("false ? 1 : 2", 2);
  ExpectInt("false ? 1 : true ? 2 : 3", 2);
  ExpectInt("true ? false ? 1 : 2 : 3", 2);
  ExpectInt("(false ? 1 : 2) + 10", 12);
}

TEST(ExprConditionalTest, EvaluatesOnlyTheChosenBranch) {
  ExpectInt("true ? 1 : 1 / 0", 1);
  ExpectInt("false ? nobody : 2", 2);
}

TEST(ExprConditionalTest, ConditionMustBeABool) {
  EXPECT_EQ(Error("1 ? 2 : 3"), In("ternary condition must be bool, got int", "1 ? 2 : 3"));
}

TEST(ExprCoalesceTest, YieldsTheRightSideWhenTheLeftIsNilOrMissing) {
  ExpectInt("nil ?? 1", 1);
  EXPECT_EQ(Eval(R"(inputs.missing ?? "d")"), "d");
  EXPECT_EQ(Eval(R"(undefined_variable ?? "d")"), "d");
  EXPECT_EQ(Eval(R"(undefined_variable.field ?? "d")"), "d");
  ExpectInt("inputs.list[10] ?? 0", 0);
  EXPECT_EQ(Eval(R"(inputs.who ?? "x")"), "world");
  ExpectBool("false ?? true", false);
  ExpectInt("nil ?? nil ?? 3", 3);
}

TEST(ExprCoalesceTest, RightSideIsNotEvaluatedWhenTheLeftIsPresent) {
  ExpectInt("1 ?? (1 / 0)", 1);
  EXPECT_EQ(Error("nil ?? (1 / 0)"), In("division by zero", "nil ?? (1 / 0)"));
}

// ---- Variables, members and indexing -----------------------------------------------

TEST(ExprVariableTest, MembersReadVariables) {
  EXPECT_EQ(Eval("tasks.greeting"), "hello");
  ExpectInt("item.index", 0);
  ExpectInt("item.value", 1);
  EXPECT_EQ(Eval("job.id"), "j-1");
  EXPECT_EQ(Eval("job.name"), "demo");
  EXPECT_EQ(Eval("secrets.token"), "s3cret");
  EXPECT_EQ(Eval(R"(inputs["who"])"), "world");
  EXPECT_EQ(Eval("inputs.nested.deep.x"), "y");
  EXPECT_EQ(Eval(R"(inputs["nested"]["deep"].x)"), "y");
  EXPECT_EQ(Eval("{a: {b: 'c'}}.a.b"), "c");
}

TEST(ExprVariableTest, MissingKeysAndMembersOfNilAreNil) {
  EXPECT_TRUE(Eval("inputs.missing").is_null());
  EXPECT_TRUE(Eval(R"(inputs["missing"])").is_null());
  EXPECT_TRUE(Eval("inputs.missing.deeper").is_null());
  EXPECT_TRUE(Eval("nil.x").is_null());
  EXPECT_TRUE(Eval("nil?.x").is_null());
  EXPECT_TRUE(Eval("inputs.missing?.[0]").is_null());
  EXPECT_EQ(Eval("inputs?.who"), "world");
}

TEST(ExprVariableTest, MemberOfANonMapIsATypeError) {
  EXPECT_EQ(Error("1.foo"), In("type int has no field foo", "1.foo"));
  EXPECT_EQ(Error("inputs.who.length"), In("type string has no field length", "inputs.who.length"));
  EXPECT_EQ(Error("inputs.list?.x"), In("type list has no field x", "inputs.list?.x"));
}

TEST(ExprVariableTest, UnknownVariableIsAnError) {
  EXPECT_EQ(Error("nobody"), "unknown name nobody in \"{{ nobody }}\"");
  EXPECT_EQ(Error("nobody.field"), In("unknown name nobody", "nobody.field"));
  EXPECT_EQ(Evaluate("x", Value(5)).status().message(), In("unknown name x", "x"));
}

TEST(ExprVariableTest, KeywordsAreNotVariables) {
  EXPECT_EQ(Error("and"), In(R"(syntax error at offset 0: unexpected "and")", "and"));
  EXPECT_EQ(Error("1 + in"), In(R"(syntax error at offset 4: unexpected "in")", "1 + in"));
}

TEST(ExprIndexTest, ListIndexCountsNegativeFromTheEnd) {
  ExpectInt("inputs.list[0]", 1);
  ExpectInt("inputs.list[-1]", 3);
  ExpectInt("[10, 20, 30][1]", 20);
  ExpectInt("[[1, 2], [3, 4]][1][0]", 3);
}

TEST(ExprIndexTest, IndexOutOfRangeIsAnError) {
  EXPECT_EQ(Error("inputs.list[3]"), In("index out of range: 3 (length 3)", "inputs.list[3]"));
  EXPECT_EQ(Error("inputs.list[-4]"), In("index out of range: -4 (length 3)", "inputs.list[-4]"));
  EXPECT_EQ(Error("[][0]"), In("index out of range: 0 (length 0)", "[][0]"));
}

TEST(ExprIndexTest, IndexTypesAreChecked) {
  EXPECT_EQ(Error(R"(inputs.list["a"])"),
            In("index must be an int, got string", R"(inputs.list["a"])"));
  EXPECT_EQ(Error("inputs.list[1.0]"), In("index must be an int, got float", "inputs.list[1.0]"));
  EXPECT_EQ(Error("inputs[0]"), In("map key must be a string, got int", "inputs[0]"));
  EXPECT_EQ(Error("true[0]"), In("cannot index bool", "true[0]"));
  EXPECT_TRUE(Eval("nil[0]").is_null());
}

TEST(ExprIndexTest, StringsIndexAndSliceByCodePoint) {
  EXPECT_EQ(Eval(R"("héllo"[1])"), "é");
  EXPECT_EQ(Eval(R"("héllo"[-1])"), "o");
  EXPECT_EQ(Eval(R"("héllo"[1:3])"), "él");
  EXPECT_EQ(Error(R"("hé"[2])"), In("index out of range: 2 (length 2)", R"("hé"[2])"));
}

TEST(ExprIndexTest, SlicesClampTheirBounds) {
  ExpectJson("[1, 2, 3, 4][1:3]", "[2,3]");
  ExpectJson("[1, 2, 3, 4][:2]", "[1,2]");
  ExpectJson("[1, 2, 3, 4][2:]", "[3,4]");
  ExpectJson("[1, 2, 3, 4][:]", "[1,2,3,4]");
  ExpectJson("[1, 2, 3, 4][-2:]", "[3,4]");
  ExpectJson("[1, 2, 3, 4][5:9]", "[]");
  ExpectJson("[1, 2, 3, 4][3:1]", "[]");
  ExpectJson("[1, 2, 3, 4][-9:1]", "[1]");
  ExpectJson("inputs.list[1:]", "[2,3]");
  EXPECT_EQ(Error("1[0:1]"), In("cannot slice int", "1[0:1]"));
  EXPECT_EQ(Error(R"([1][nil:1])"), In("slice index must be an int, got nil", "[1][nil:1]"));
}

// ---- Syntax errors and limits ------------------------------------------------------

TEST(ExprSyntaxTest, ErrorsReportTheOffset) {
  EXPECT_EQ(Error("1 + "),
            "syntax error at offset 4: unexpected end of expression in \"{{ 1 + }}\"");
  EXPECT_EQ(Error("1 +"), In("syntax error at offset 3: unexpected end of expression", "1 +"));
  EXPECT_EQ(Error("  1 +"), In("syntax error at offset 3: unexpected end of expression", "1 +"));
  EXPECT_EQ(Error("1 + )"), In(R"x(syntax error at offset 4: unexpected ")")x", "1 + )"));
  EXPECT_EQ(Error("(1"), In("syntax error at offset 2: unexpected end of expression", "(1"));
  EXPECT_EQ(Error("1 2"), In(R"(syntax error at offset 2: unexpected "2")", "1 2"));
  EXPECT_EQ(Error("a @ b"), In(R"(syntax error at offset 2: unexpected character "@")", "a @ b"));
  EXPECT_EQ(Error("1 = 2"), In(R"(syntax error at offset 2: unexpected character "=")", "1 = 2"));
  EXPECT_EQ(Error("\x01"), In("syntax error at offset 0: unexpected byte 0x01", "\x01"));
  EXPECT_EQ(Error("a.1"), In(R"(syntax error at offset 2: unexpected "1")", "a.1"));
  EXPECT_EQ(Error("true ? 1"),
            In("syntax error at offset 8: unexpected end of expression", "true ? 1"));
  EXPECT_EQ(Error("{1: 2}"), In(R"(syntax error at offset 1: unexpected "1")", "{1: 2}"));
  EXPECT_EQ(Error("inputs.who()"),
            In(R"(syntax error at offset 10: unexpected "(")", "inputs.who()"));
}

TEST(ExprSyntaxTest, EmptyExpressionIsASyntaxError) {
  EXPECT_EQ(Error(""), "syntax error at offset 0: unexpected end of expression in \"{{  }}\"");
  EXPECT_EQ(Error("   "), "syntax error at offset 0: unexpected end of expression in \"{{  }}\"");
}

TEST(ExprSyntaxTest, UnknownFunctionIsAnErrorWhenEvaluated) {
  EXPECT_EQ(Error("bad_function()"), "unknown name bad_function in \"{{ bad_function() }}\"");
  EXPECT_EQ(Error("true ? bad_function(1 / 0) : 1"),
            "unknown name bad_function in \"{{ true ? bad_function(1 / 0) : 1 }}\"");
  // Checking parses only: a job may name it and fail where it is evaluated.
  EXPECT_TRUE(CheckExpression("bad_function()").ok());
  EXPECT_EQ(Evaluate("false ? bad_function() : 2", Value::object())->get<int>(), 2);
}

TEST(ExprSyntaxTest, WrongArgumentCountIsAnErrorBeforeEvaluation) {
  EXPECT_EQ(CheckExpression("sequence(1)").message(),
            In("sequence: want 2 arguments, got 1", "sequence(1)"));
  EXPECT_EQ(Error("len(1, 2)"), In("len: want 1 argument, got 2", "len(1, 2)"));
  EXPECT_EQ(Error("trim()"), In("trim: want 1 or 2 arguments, got 0", "trim()"));
  EXPECT_EQ(Error("min()"), In("min: want at least 1 argument, got 0", "min()"));
  EXPECT_EQ(Error("now(1)"), In("now: want 0 arguments, got 1", "now(1)"));
}

TEST(ExprSyntaxTest, CheckExpressionParsesWithoutEvaluating) {
  EXPECT_TRUE(CheckExpression("1 / 0").ok());
  EXPECT_TRUE(CheckExpression("unknown_variable.x + 1").ok());
  EXPECT_EQ(CheckExpression("1 +").message(),
            In("syntax error at offset 3: unexpected end of expression", "1 +"));
  EXPECT_EQ(CheckExpression("1 +").code(), StatusCode::kInvalidArgument);
}

TEST(ExprLimitTest, DeepNestingIsAnErrorNotACrash) {
  const std::string too_deep = "expression nested too deeply";
  EXPECT_THAT(Error(std::string(10000, '(') + "1" + std::string(10000, ')')), StartsWith(too_deep));
  EXPECT_THAT(Error(std::string(10000, '[')), StartsWith(too_deep));
  EXPECT_THAT(Error(std::string(10000, '!') + "true"), StartsWith(too_deep));
  EXPECT_THAT(Error(std::string(10000, '-') + "1"), StartsWith(too_deep));
  std::string maps;
  for (int i = 0; i < 10000; ++i) maps += "{a: ";
  EXPECT_THAT(Error(maps), StartsWith(too_deep));
  std::string ternary;
  for (int i = 0; i < 5000; ++i) ternary += "true ? 1 : ";
  EXPECT_THAT(Error(ternary + "2"), StartsWith(too_deep));
  // 100 levels are fine.
  ExpectInt(std::string(100, '(') + "1" + std::string(100, ')'), 1);
}

TEST(ExprLimitTest, LongOperatorChainsAreCappedToo) {
  std::string sum = "1";
  for (int i = 0; i < 5000; ++i) sum += "+1";
  EXPECT_THAT(Error(sum), StartsWith("expression nested too deeply"));
  std::string path = "inputs";
  for (int i = 0; i < 5000; ++i) path += ".a";
  EXPECT_THAT(Error(path), StartsWith("expression nested too deeply"));
  std::string sum100 = "1";
  for (int i = 0; i < 99; ++i) sum100 += "+1";
  ExpectInt(sum100, 100);
}

TEST(ExprLimitTest, OverlongExpressionIsAnErrorAndQuotedTruncated) {
  const std::string expression = std::string(kMaxExpressionBytes, '1') + "+1";
  const std::string message = Error(expression);
  EXPECT_EQ(message,
            "expression longer than 65536 bytes in \"{{ " + std::string(200, '1') + "... }}\"");
}

TEST(ExprLimitTest, TruncationDoesNotSplitCodePoints) {
  const std::string expression = "nobody + '" + std::string(189, 'x') + "\u00e9\u00e9'";
  const std::string message = Error(expression);
  // Byte 200 is inside the first "é", so the quote stops before it.
  EXPECT_THAT(message, EndsWith("'" + std::string(189, 'x') + "... }}\""));
}

TEST(ExprLimitTest, WorkPerEvaluationIsBounded) {
  std::string list = "[";
  for (int i = 0; i < 6; ++i) list += "repeat('a', 16000000), ";
  list += "]";
  EXPECT_THAT(Error(list), StartsWith("repeat: evaluation exceeds its work limit in"));
  EXPECT_THAT(Error("len(split(repeat('a', 8000000), ''))"),
              StartsWith("split: evaluation exceeds its work limit in"));
  EXPECT_THAT(Error("(0..999999) + (0..999999)"),
              StartsWith("evaluation exceeds its work limit in"));
  EXPECT_THAT(Error("fromJSON('[' + repeat('0,', 2000000) + '0]')"),
              StartsWith("fromJSON: evaluation exceeds its work limit in"));
}

TEST(ExprLimitTest, SubstringSearchesStayLinear) {
  // A naive search would compare a megabyte at each of a million positions.
  ExpectBool("repeat('a', 2000000) contains repeat('a', 1000000) + 'b'", false);
  ExpectInt("indexOf(repeat('a', 2000000), repeat('a', 1000000) + 'b')", -1);
  ExpectInt("len(split(repeat('a', 2000000), repeat('a', 1000000) + 'b'))", 1);
  ExpectInt("len(replace(repeat('a', 2000000), repeat('a', 1000000) + 'b', ''))", 2000000);
  ExpectInt("len(trim(repeat('ab', 1000000), repeat('a', 1000000)))", 1999999);
}

TEST(ExprLimitTest, ExceptionsFromHooksBecomeErrors) {
  EvalOptions options;
  options.now = []() -> std::string { throw std::runtime_error("clock broke"); };
  Result<Value> result = Evaluate("now()", Vars(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), In("clock broke", "now()"));
}

// ---- Functions ---------------------------------------------------------------------

TEST(ExprFunctionTest, SequenceCountsUpToStopExclusive) {
  ExpectJson("sequence(1, 5)", "[1,2,3,4]");
  ExpectJson("sequence(-2, 1)", "[-2,-1,0]");
  ExpectJson("sequence(5, 5)", "[]");
  ExpectJson("sequence(5, 1)", "[]");
  ExpectInt("len(sequence(0, 1000000))", 1000000);
}

TEST(ExprFunctionTest, SequenceIsCappedAndNeedsIntegers) {
  EXPECT_EQ(Error("sequence(0, 2000000)"),
            In("sequence: more than 1000000 elements", "sequence(0, 2000000)"));
  EXPECT_EQ(Error("sequence(-9223372036854775808, 9223372036854775807)"),
            In("sequence: more than 1000000 elements",
               "sequence(-9223372036854775808, 9223372036854775807)"));
  EXPECT_EQ(Error(R"(sequence("a", 2))"),
            In("sequence: argument 1 must be an int, got string", R"(sequence("a", 2))"));
  EXPECT_EQ(Error("sequence(1, 2.5)"),
            In("sequence: argument 2 must be an int, got float", "sequence(1, 2.5)"));
}

TEST(ExprFunctionTest, RandomIntUsesTheInjectedSource) {
  ExpectInt("randomInt(10)", 9);
  ExpectInt("randomInt()", std::numeric_limits<std::int64_t>::max() - 1);
  EXPECT_EQ(Error("randomInt(0)"), In("randomInt: n must be positive, got 0", "randomInt(0)"));
  EXPECT_EQ(Error("randomInt(-5)"), In("randomInt: n must be positive, got -5", "randomInt(-5)"));
  EXPECT_EQ(Error("randomInt('x')"),
            In("randomInt: argument 1 must be an int, got string", "randomInt('x')"));
  EvalOptions broken;
  broken.random = [](std::int64_t n) { return n; };
  EXPECT_EQ(Evaluate("randomInt(3)", Vars(), broken).status().message(),
            In("randomInt: random source returned 3, outside [0, 3)", "randomInt(3)"));
}

TEST(ExprFunctionTest, RandomIntDefaultsToARealSource) {
  for (int i = 0; i < 50; ++i) {
    Result<Value> r = Evaluate("randomInt(3)", Vars());
    ASSERT_TRUE(r.ok());
    EXPECT_GE(r->get<std::int64_t>(), 0);
    EXPECT_LT(r->get<std::int64_t>(), 3);
  }
  Result<Value> r = Evaluate("randomInt()", Vars());
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->get<std::int64_t>(), 0);
}

TEST(ExprFunctionTest, FromJsonParsesValues) {
  ExpectFloat(R"(fromJSON('{"a": [1, 2.5, "x", true, null]}').a[1])", 2.5);
  ExpectInt("fromJSON('1') + 1", 2);
  ExpectJson(R"(fromJSON("[1, {\"b\": null}]"))", R"([1,{"b":null}])");
  ExpectJson(R"(fromJSON(toJSON({a: [1, 'x']})))", R"({"a":[1,"x"]})");
}

TEST(ExprFunctionTest, FromJsonReportsTheReasonOfParseErrors) {
  const std::string message = Error("fromJSON('[1,')");
  EXPECT_THAT(message, StartsWith("fromJSON: parse error at line 1, column 4: syntax error"));
  EXPECT_THAT(message, EndsWith(" in \"{{ fromJSON('[1,') }}\""));
  EXPECT_THAT(Error("fromJSON(1)"), StartsWith("fromJSON: argument 1 must be a string, got int"));
}

TEST(ExprFunctionTest, FromJsonRejectsDeepNestingBeforeParsing) {
  EXPECT_EQ(Error("fromJSON(repeat('[', 100000))"),
            In("fromJSON: input nested too deeply", "fromJSON(repeat('[', 100000))"));
  ExpectInt("len(fromJSON(repeat('[', 128) + repeat(']', 128)))", 1);
  // Brackets inside strings do not count.
  ExpectInt(R"(len(fromJSON('"' + repeat('[', 1000) + '"')))", 1000);
}

TEST(ExprFunctionTest, ToJsonRendersCompactJson) {
  EXPECT_EQ(Eval("toJSON({a: [1, 2.5, 'x', nil, true]})"), R"({"a":[1,2.5,"x",null,true]})");
  EXPECT_EQ(Eval("toJSON('s')"), R"("s")");
  EXPECT_EQ(Eval("toJSON(inputs.list)"), "[1,2,3]");
}

TEST(ExprFunctionTest, SplitAndJoin) {
  ExpectJson("split('a,b,,c', ',')", R"(["a","b","","c"])");
  ExpectJson("split('a::b', '::')", R"(["a","b"])");
  ExpectJson("split('héy', '')", R"(["h","é","y"])");
  ExpectJson("split('', ',')", R"([""])");
  ExpectJson("split('', '')", "[]");
  EXPECT_EQ(Eval("join(['a', 1, 2.0, true, nil, [1]], ',')"), "a,1,2,true,,[1]");
  EXPECT_EQ(Eval("join(['a', 'b'])"), "ab");
  EXPECT_EQ(Eval("join(split('a b c', ' '), '-')"), "a-b-c");
  EXPECT_EQ(Error("join('x', ',')"),
            In("join: argument 1 must be a list, got string", "join('x', ',')"));
  EXPECT_EQ(Error("split('x', 1)"),
            In("split: argument 2 must be a string, got int", "split('x', 1)"));
}

TEST(ExprFunctionTest, LenCountsCodePointsElementsAndKeys) {
  ExpectInt("len('héllo')", 5);
  ExpectInt("len('')", 0);
  ExpectInt("len(inputs.list)", 3);
  ExpectInt("len({a: 1, b: 2})", 2);
  EXPECT_EQ(Error("len(1)"),
            In("len: argument 1 must be a string, list or map, got int", "len(1)"));
}

TEST(ExprFunctionTest, UpperAndLowerChangeAsciiCase) {
  EXPECT_EQ(Eval("upper('abC1é')"), "ABC1é");
  EXPECT_EQ(Eval("lower('ABc1É')"), "abc1É");
  EXPECT_EQ(Error("upper(1)"), In("upper: argument 1 must be a string, got int", "upper(1)"));
}

TEST(ExprFunctionTest, TrimRemovesWhitespaceOrGivenCharacters) {
  EXPECT_EQ(Eval("trim('  x y \\n\\t')"), "x y");
  EXPECT_EQ(Eval("trim('xxhixyx', 'xy')"), "hi");
  EXPECT_EQ(Eval("trim('éaé', 'é')"), "a");
  EXPECT_EQ(Eval("trim('xxx', 'x')"), "");
  EXPECT_EQ(Eval("trim('   ')"), "");
}

TEST(ExprFunctionTest, IntConvertsNumbersAndNumericStrings) {
  ExpectInt("int(3)", 3);
  ExpectInt("int(3.9)", 3);
  ExpectInt("int(-3.9)", -3);
  ExpectInt("int('42')", 42);
  ExpectInt("int('-7')", -7);
  ExpectInt("int('+5')", 5);
  EXPECT_EQ(Error("int('x')"), In("int: invalid integer (a string of 1 byte)", "int('x')"));
  EXPECT_EQ(Error("int('1.5')"), In("int: invalid integer (a string of 3 bytes)", "int('1.5')"));
  EXPECT_EQ(Error("int('')"), In("int: invalid integer (a string of 0 bytes)", "int('')"));
  EXPECT_EQ(Error("int('99999999999999999999')"),
            In("int: out of range (a string of 20 bytes)", "int('99999999999999999999')"));
  EXPECT_EQ(Error("int(1e19)"), In("int: 1e+19 is out of range", "int(1e19)"));
  EXPECT_EQ(Error("int(true)"),
            In("int: argument 1 must be a number or string, got bool", "int(true)"));
  EXPECT_EQ(Error("int(inputs.huge)"),
            In("int: 18446744073709551615 is out of range", "int(inputs.huge)"));
}

TEST(ExprFunctionTest, FloatConvertsNumbersAndNumericStrings) {
  ExpectFloat("float(2)", 2);
  ExpectFloat("float(2.5)", 2.5);
  ExpectFloat("float('1.5')", 1.5);
  ExpectFloat("float('-1e3')", -1000);
  EXPECT_EQ(Error("float('inf')"),
            In("float: invalid number (a string of 3 bytes)", "float('inf')"));
  EXPECT_EQ(Error("float('1.5x')"),
            In("float: invalid number (a string of 4 bytes)", "float('1.5x')"));
  EXPECT_EQ(Error("float('1e999')"),
            In("float: out of range (a string of 5 bytes)", "float('1e999')"));
  EXPECT_EQ(Error("float(nil)"),
            In("float: argument 1 must be a number or string, got nil", "float(nil)"));
}

TEST(ExprFunctionTest, StringRendersValuesAsText) {
  EXPECT_EQ(Eval("string(2.0)"), "2");
  EXPECT_EQ(Eval("string(42)"), "42");
  EXPECT_EQ(Eval("string(nil)"), "");
  EXPECT_EQ(Eval("string(true)"), "true");
  EXPECT_EQ(Eval("string([1, 'a'])"), R"([1,"a"])");
  EXPECT_EQ(Eval("string('s')"), "s");
}

TEST(ExprFunctionTest, KeysAndValuesFollowKeyOrder) {
  ExpectJson("keys({b: 1, a: 2})", R"(["a","b"])");
  ExpectJson("values({b: 1, a: 2})", "[2,1]");
  ExpectJson("keys(job)", R"(["id","name"])");
  ExpectJson("values(job)", R"(["j-1","demo"])");
  EXPECT_EQ(Error("keys([])"), In("keys: argument 1 must be a map, got list", "keys([])"));
}

TEST(ExprFunctionTest, NowUsesTheInjectedClock) {
  EXPECT_EQ(Eval("now()"), "2024-05-06T07:08:09Z");
}

TEST(ExprFunctionTest, NowDefaultsToTheSystemClockInRfc3339) {
  Result<Value> r = Evaluate("now()", Vars());
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->get<std::string>(),
              MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"));
}

TEST(ExprFunctionTest, AbsMinAndMax) {
  ExpectInt("abs(-3)", 3);
  ExpectInt("abs(3)", 3);
  ExpectFloat("abs(-2.5)", 2.5);
  EXPECT_EQ(Error("abs(-9223372036854775808)"),
            In("abs: integer overflow", "abs(-9223372036854775808)"));
  ExpectInt("min(3, 1, 2)", 1);
  ExpectFloat("max(1, 5.5, 2)", 5.5);
  ExpectInt("max([4, 9, 2])", 9);
  ExpectInt("min(7)", 7);
  EXPECT_EQ(Error("max([])"), In("max: no values", "max([])"));
  EXPECT_EQ(Error("min(1, 'a')"),
            In("min: argument 2 must be a number, got string", "min(1, 'a')"));
  EXPECT_EQ(Error("max([1, 'a'])"), In("max: element 1 is string, not a number", "max([1, 'a'])"));
}

TEST(ExprFunctionTest, FirstLastAndReverse) {
  ExpectInt("first(inputs.list)", 1);
  ExpectInt("last(inputs.list)", 3);
  EXPECT_TRUE(Eval("first([])").is_null());
  EXPECT_TRUE(Eval("last([])").is_null());
  ExpectJson("reverse([1, 'a', nil])", R"([null,"a",1])");
  ExpectJson("reverse(inputs.list)", "[3,2,1]");
  EXPECT_EQ(Error("first('ab')"),
            In("first: argument 1 must be a list, got string", "first('ab')"));
  EXPECT_EQ(Error("reverse({})"), In("reverse: argument 1 must be a list, got map", "reverse({})"));
}

TEST(ExprFunctionTest, IndexOfFindsSubstringsAndElements) {
  ExpectInt("indexOf('héllo', 'l')", 2);
  ExpectInt("indexOf('abc', 'x')", -1);
  ExpectInt("indexOf('abc', '')", 0);
  ExpectInt("indexOf([1, 2, 3], 3.0)", 2);
  ExpectInt("indexOf([1], 5)", -1);
  EXPECT_EQ(Error("indexOf(1, 1)"),
            In("indexOf: argument 1 must be a string or list, got int", "indexOf(1, 1)"));
}

TEST(ExprFunctionTest, ReplaceReplacesAllOccurrences) {
  EXPECT_EQ(Eval("replace('a-b-c', '-', '+')"), "a+b+c");
  EXPECT_EQ(Eval("replace('aaa', 'aa', 'b')"), "ba");
  EXPECT_EQ(Eval("replace('hé', '', '.')"), ".h.é.");
  EXPECT_EQ(Eval("replace('abc', 'x', 'y')"), "abc");
  EXPECT_EQ(Error("replace('a', 'a', 1)"),
            In("replace: argument 3 must be a string, got int", "replace('a', 'a', 1)"));
}

TEST(ExprFunctionTest, RepeatRepeatsUpToTheStringCap) {
  EXPECT_EQ(Eval("repeat('ab', 3)"), "ababab");
  EXPECT_EQ(Eval("repeat('ab', 0)"), "");
  EXPECT_EQ(Eval("repeat('', 1000000000)"), "");
  EXPECT_EQ(Error("repeat('ab', -1)"),
            In("repeat: count must not be negative, got -1", "repeat('ab', -1)"));
  EXPECT_EQ(Error("repeat('ab', 9000000)"),
            In("repeat: result longer than 16777216 bytes", "repeat('ab', 9000000)"));
}

TEST(ExprFunctionTest, StringGrowthIsCapped) {
  EXPECT_EQ(Error("repeat('a', 16777216) + 'a'"),
            In("result of + longer than 16777216 bytes", "repeat('a', 16777216) + 'a'"));
  EXPECT_EQ(
      Error("join([repeat('a', 16777216), 'b'], '')"),
      In("join: result longer than 16777216 bytes", "join([repeat('a', 16777216), 'b'], '')"));
  // Refused before rendering, which is slower than making the strings.
  EXPECT_EQ(Error("toJSON([repeat('a', 9000000), repeat('b', 9000000)])"),
            In("toJSON: result longer than 16777216 bytes",
               "toJSON([repeat('a', 9000000), repeat('b', 9000000)])"));
  EXPECT_EQ(Error("string({a: repeat('a', 9000000), b: repeat('b', 9000000)})"),
            In("string: result longer than 16777216 bytes",
               "string({a: repeat('a', 9000000), b: repeat('b', 9000000)})"));
  // Each control character is escaped to six bytes.
  EXPECT_EQ(Error(R"(toJSON(repeat("\x01", 3000000)))"),
            In("toJSON: result longer than 16777216 bytes", R"(toJSON(repeat("\x01", 3000000)))"));
  EXPECT_EQ(Error("replace('aaaaaaaaaa', 'a', repeat('b', 2000000))"),
            In("replace: result longer than 16777216 bytes",
               "replace('aaaaaaaaaa', 'a', repeat('b', 2000000))"));
  EXPECT_EQ(Error("replace('aaaaaaaaaa', '', repeat('b', 2000000))"),
            In("replace: result longer than 16777216 bytes",
               "replace('aaaaaaaaaa', '', repeat('b', 2000000))"));
}

TEST(ExprFunctionTest, HasPrefixAndHasSuffix) {
  ExpectBool("hasPrefix('abc', 'ab')", true);
  ExpectBool("hasPrefix('abc', 'bc')", false);
  ExpectBool("hasSuffix('abc', 'bc')", true);
  ExpectBool("hasSuffix('abc', 'ab')", false);
}

TEST(ExprFunctionTest, Base64RoundTrips) {
  EXPECT_EQ(Eval("toBase64('hello')"), "aGVsbG8=");
  EXPECT_EQ(Eval("toBase64('hi')"), "aGk=");
  EXPECT_EQ(Eval("toBase64('abc')"), "YWJj");
  EXPECT_EQ(Eval("toBase64('')"), "");
  EXPECT_EQ(Eval("fromBase64('aGVsbG8=')"), "hello");
  EXPECT_EQ(Eval("fromBase64('aGk=')"), "hi");
  EXPECT_EQ(Eval("fromBase64(toBase64('\\u00e9\\x00\\xff'))"), std::string("\xc3\xa9\0\xff", 4));
}

TEST(ExprFunctionTest, FromBase64RejectsInvalidInput) {
  EXPECT_EQ(Error("fromBase64('aGVsbG8')"),
            In("fromBase64: invalid base64 length 7", "fromBase64('aGVsbG8')"));
  EXPECT_EQ(Error("fromBase64('aG!s')"),
            In("fromBase64: illegal base64 data at input byte 2", "fromBase64('aG!s')"));
  EXPECT_EQ(Error("fromBase64('a===')"),
            In("fromBase64: illegal base64 data at input byte 1", "fromBase64('a===')"));
  EXPECT_EQ(Error("fromBase64('aG=k')"),
            In("fromBase64: illegal base64 data at input byte 2", "fromBase64('aG=k')"));
  EXPECT_EQ(Error("fromBase64('aGk=aGk=')"),
            In("fromBase64: illegal base64 data at input byte 3", "fromBase64('aGk=aGk=')"));
}

}  // namespace
}  // namespace baton::expr
