// Tests of `{{ expr }}` templates and of rendering values as text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "expr/expr.h"

namespace baton::expr {
namespace {

using ::testing::StartsWith;

const Value& Vars() {
  static const Value vars = Value::parse(R"({
    "inputs": {"who": "world", "list": [1, 2, 3]},
    "secrets": {"token": "s3cret"},
    "tasks": {"greeting": "hello"},
    "job": {"id": "j-1", "name": "demo"},
    "item": {"index": 0, "value": 1}
  })");
  return vars;
}

EvalOptions Pinned() {
  EvalOptions options;
  options.random = [](std::int64_t) { return std::int64_t{0}; };
  options.now = [] { return std::string("2024-05-06T07:08:09Z"); };
  return options;
}

std::string Render(std::string_view text) {
  Result<std::string> result = EvaluateTemplate(text, Vars(), Pinned());
  EXPECT_TRUE(result.ok()) << text << ": " << result.status().message();
  return result.ok() ? *result : "<error>";
}

std::string RenderError(std::string_view text) {
  Result<std::string> result = EvaluateTemplate(text, Vars(), Pinned());
  EXPECT_FALSE(result.ok()) << text << " gave " << (result.ok() ? *result : "");
  if (result.ok()) return "<no error>";
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  // CheckTemplate finds the same syntax errors without evaluating.
  return result.status().message();
}

Value NativeValue(std::string_view text) {
  Result<Value> result = EvaluateTemplateValue(text, Vars(), Pinned());
  EXPECT_TRUE(result.ok()) << text << ": " << result.status().message();
  return result.ok() ? *result : Value("<error>");
}

TEST(ExprTemplateTest, HasTemplateDetectsOpeningBraces) {
  EXPECT_TRUE(HasTemplate("a {{ b }}"));
  EXPECT_TRUE(HasTemplate("{{"));
  EXPECT_FALSE(HasTemplate("plain { text }"));
  EXPECT_FALSE(HasTemplate(""));
}

TEST(ExprTemplateTest, TextWithoutTemplatesIsUnchanged) {
  EXPECT_EQ(Render("plain text"), "plain text");
  EXPECT_EQ(Render("json {\"a\": {\"b\": 1} }"), "json {\"a\": {\"b\": 1} }");
  EXPECT_EQ(Render("a } b { c"), "a } b { c");
  EXPECT_EQ(Render(""), "");
}

TEST(ExprTemplateTest, TemplateIsReplacedByItsValueWithTextAround) {
  EXPECT_EQ(Render("hello {{ inputs.who }}!"), "hello world!");
  EXPECT_EQ(Render("{{inputs.who}}"), "world");
  EXPECT_EQ(Render("  {{ tasks.greeting }}  "), "  hello  ");
}

TEST(ExprTemplateTest, SeveralTemplatesInOneText) {
  EXPECT_EQ(Render("{{ tasks.greeting }}, {{ inputs.who }} ({{ 1 + 1 }})"), "hello, world (2)");
  EXPECT_EQ(Render("{{ 1 }}{{ 2 }}{{ 3 }}"), "123");
  EXPECT_EQ(Render("{{ item.index }}: {{ item.value }} of {{ job.name }}/{{ job.id }}"),
            "0: 1 of demo/j-1");
  EXPECT_EQ(Render("token={{ secrets.token }}"), "token=s3cret");
}

TEST(ExprTemplateTest, ClosingBracesInsideStringsDoNotCloseTheTemplate) {
  EXPECT_EQ(Render(R"({{ "}}" }})"), "}}");
  EXPECT_EQ(Render(R"(a{{ '}}' + "{{" }}b)"), "a}}{{b");
  EXPECT_EQ(Render(R"({{ `}}` }})"), "}}");
}

TEST(ExprTemplateTest, MapLiteralBracesAreMatched) {
  EXPECT_EQ(Render(R"({{ {"a": {"b": 1}} }})"), R"({"a":{"b":1}})");
  EXPECT_EQ(Render("{{ {a: 1}}}"), R"({"a":1})");
  EXPECT_EQ(Render("{{ {a: 1}.a }}"), "1");
}

TEST(ExprTemplateTest, UnclosedTemplateReportsItsOffset) {
  EXPECT_EQ(RenderError("ab {{ inputs.who"), "unclosed \"{{\" at offset 3");
  EXPECT_EQ(RenderError("{{ 1 }} {{"), "unclosed \"{{\" at offset 8");
  EXPECT_EQ(RenderError("{{ {a: 1} }"), "unclosed \"{{\" at offset 0");
  EXPECT_EQ(CheckTemplate("ab {{ inputs.who").message(), "unclosed \"{{\" at offset 3");
}

TEST(ExprTemplateTest, UnopenedClosingBracesReportTheirOffset) {
  EXPECT_EQ(RenderError("a }} b"), "unexpected \"}}\" at offset 2");
  EXPECT_EQ(RenderError("{{ 1 }} }}"), "unexpected \"}}\" at offset 8");
  EXPECT_EQ(CheckTemplate("}}").message(), "unexpected \"}}\" at offset 0");
}

TEST(ExprTemplateTest, ExpressionErrorsQuoteTheExpression) {
  EXPECT_EQ(RenderError("x {{ bad_function() }}"),
            "unknown name bad_function in \"{{ bad_function() }}\"");
  EXPECT_EQ(RenderError("{{ 1 / 0 }}"), "division by zero in \"{{ 1 / 0 }}\"");
  EXPECT_EQ(RenderError("{{ 1 + }}"),
            "syntax error at offset 4: unexpected end of expression in \"{{ 1 + }}\"");
  EXPECT_EQ(RenderError("ok {{ 1 }} {{ nobody }}"), "unknown name nobody in \"{{ nobody }}\"");
}

TEST(ExprTemplateTest, MalformedTokensInsideATemplateAreSyntaxErrors) {
  EXPECT_EQ(RenderError(R"({{ "abc }})"),
            R"(syntax error at offset 0: unterminated string in "{{ "abc }}")");
  EXPECT_EQ(RenderError("{{ 1 @ 2 }}"),
            R"(syntax error at offset 2: unexpected character "@" in "{{ 1 @ 2 }}")");
  EXPECT_EQ(RenderError("{{ 99999999999999999999 }}"),
            R"(syntax error at offset 0: number too large in "{{ 99999999999999999999 }}")");
  EXPECT_EQ(RenderError("{{ 'abc"), "unclosed \"{{\" at offset 0");
}

TEST(ExprTemplateTest, EmptyTemplateIsASyntaxError) {
  EXPECT_EQ(RenderError("{{ }}"),
            "syntax error at offset 0: unexpected end of expression in \"{{  }}\"");
  EXPECT_EQ(RenderError("{{}}"),
            "syntax error at offset 0: unexpected end of expression in \"{{  }}\"");
}

TEST(ExprTemplateTest, CheckTemplateParsesWithoutEvaluating) {
  EXPECT_TRUE(CheckTemplate("plain").ok());
  EXPECT_TRUE(CheckTemplate("{{ 1 / 0 }} and {{ undefined_variable }}").ok());
  EXPECT_TRUE(CheckTemplate(R"({{ "}}" }})").ok());
  // Like an unknown variable, an unknown function is an error only when evaluated.
  EXPECT_TRUE(CheckTemplate("{{ bad_function() }}").ok());
  EXPECT_EQ(CheckTemplate("a {{ sequence(1) }}").message(),
            "sequence: want 2 arguments, got 1 in \"{{ sequence(1) }}\"");
  EXPECT_EQ(CheckTemplate("{{ 1 + }}").message(),
            "syntax error at offset 4: unexpected end of expression in \"{{ 1 + }}\"");
  EXPECT_EQ(CheckTemplate("{{ 1 + }}").code(), StatusCode::kInvalidArgument);
}

TEST(ExprTemplateTest, LongExpressionsAreTruncatedInMessages) {
  const std::string name(300, 'v');
  EXPECT_EQ(RenderError("{{ " + name + " }}"),
            "unknown name " + name + " in \"{{ " + std::string(200, 'v') + "... }}\"");
}

TEST(ExprTemplateTest, EachValueKindRendersAsText) {
  EXPECT_EQ(
      Render("{{ 'a' }}|{{ 42 }}|{{ -7 }}|{{ 2.0 }}|{{ 2.5 }}|{{ true }}|{{ false }}|{{ nil }}"),
      "a|42|-7|2|2.5|true|false|");
  EXPECT_EQ(Render("{{ [1, 'a', nil] }} {{ {b: [true]} }}"), R"([1,"a",null] {"b":[true]})");
  EXPECT_EQ(Render("{{ inputs.list }}"), "[1,2,3]");
}

TEST(ExprTemplateTest, ExpressionsOfATemplateShareOneWorkBudget) {
  const std::string expression = "{{ repeat('a', 16000000) == '' }}";
  EXPECT_EQ(Render(expression + expression + expression), "falsefalsefalse");
  EXPECT_EQ(RenderError(expression + expression + expression + expression + expression),
            "repeat: evaluation exceeds its work limit in \"{{ repeat('a', 16000000) == '' }}\"");
}

TEST(ExprTemplateTest, TemplateResultIsCapped) {
  EXPECT_EQ(RenderError("{{ repeat('a', 16000000) }}{{ repeat('a', 1000000) }}"),
            "template result longer than 16777216 bytes");
  EXPECT_EQ(RenderError("{{ [repeat('a', 9000000), repeat('b', 9000000)] }}"),
            "template result longer than 16777216 bytes");
  // The native value is not rendered, so it is not capped.
  EXPECT_EQ(NativeValue("{{ len([repeat('a', 9000000), repeat('b', 9000000)]) }}"), Value(2));
}

TEST(ExprTemplateValueTest, SingleTemplateYieldsItsNativeValue) {
  EXPECT_EQ(NativeValue("{{ sequence(1,5) }}"), Value::parse("[1,2,3,4]"));
  const Value is_false = NativeValue("  {{ 1 == 2 }}\n");
  EXPECT_TRUE(is_false.is_boolean());
  EXPECT_EQ(is_false, Value(false));
  const Value number = NativeValue("{{ 40 + 2 }}");
  EXPECT_TRUE(number.is_number_integer());
  EXPECT_EQ(number, Value(42));
  EXPECT_EQ(NativeValue("{{ inputs }}"), Vars()["inputs"]);
  EXPECT_TRUE(NativeValue("{{ nil }}").is_null());
  EXPECT_EQ(NativeValue(R"({{ {"a": {"b": 1}} }})"), Value::parse(R"({"a":{"b":1}})"));
}

TEST(ExprTemplateValueTest, AnythingElseYieldsAString) {
  EXPECT_EQ(NativeValue("{{ 1 }}{{ 2 }}"), Value("12"));
  EXPECT_EQ(NativeValue("x {{ 1 }}"), Value("x 1"));
  EXPECT_EQ(NativeValue("{{ 1 }} x"), Value("1 x"));
  EXPECT_EQ(NativeValue("plain"), Value("plain"));
  EXPECT_EQ(NativeValue(""), Value(""));
  EXPECT_EQ(NativeValue("  {{ 1 }} "), Value(1));
}

TEST(ExprTemplateValueTest, ErrorsKeepOffsetsInTheUntrimmedText) {
  Result<Value> unclosed = EvaluateTemplateValue("  {{ a", Vars(), Pinned());
  ASSERT_FALSE(unclosed.ok());
  EXPECT_EQ(unclosed.status().message(), "unclosed \"{{\" at offset 2");
  Result<Value> failed = EvaluateTemplateValue("{{ 1 / 0 }}", Vars(), Pinned());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "division by zero in \"{{ 1 / 0 }}\"");
  Result<Value> stray = EvaluateTemplateValue("{{ 1 }} }}", Vars(), Pinned());
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.status().message(), "unexpected \"}}\" at offset 8");
}

TEST(ExprToTextTest, ScalarsRenderPlainly) {
  EXPECT_EQ(ToText(Value("text")), "text");
  EXPECT_EQ(ToText(Value(42)), "42");
  EXPECT_EQ(ToText(Value(-42)), "-42");
  EXPECT_EQ(ToText(Value(18446744073709551615ULL)), "18446744073709551615");
  EXPECT_EQ(ToText(Value(true)), "true");
  EXPECT_EQ(ToText(Value(false)), "false");
  EXPECT_EQ(ToText(Value()), "");
}

TEST(ExprToTextTest, FloatsUseTheShortestRoundTripFormWithoutTrailingZero) {
  EXPECT_EQ(ToText(Value(2.0)), "2");
  EXPECT_EQ(ToText(Value(2.5)), "2.5");
  EXPECT_EQ(ToText(Value(0.1)), "0.1");
  EXPECT_EQ(ToText(Value(-0.5)), "-0.5");
  EXPECT_EQ(ToText(Value(1e21)), "1e+21");
  EXPECT_EQ(ToText(Value(1e14)), "100000000000000");
  EXPECT_EQ(ToText(Value(1e15)), "1e+15");  // nlohmann's switch to exponent form
  EXPECT_EQ(ToText(Value(1e-5)), "1e-05");
  EXPECT_EQ(ToText(Value(1.0 / 3)), "0.3333333333333333");
}

TEST(ExprToTextTest, ListsAndMapsRenderAsCompactJson) {
  EXPECT_EQ(ToText(Value::parse(R"([1, 2.0, "a", null, {"k": [true]}])")),
            R"([1,2.0,"a",null,{"k":[true]}])");
  EXPECT_EQ(ToText(Value::array()), "[]");
  EXPECT_EQ(ToText(Value::object()), "{}");
}

TEST(ExprToTextTest, InvalidUtf8InsideJsonIsReplacedNotThrown) {
  EXPECT_EQ(ToText(Value::array({std::string("a\xff")})), "[\"a\xEF\xBF\xBD\"]");
  EXPECT_EQ(ToText(Value(std::string("\xff"))), "\xff");  // strings render as is
}

}  // namespace
}  // namespace baton::expr
