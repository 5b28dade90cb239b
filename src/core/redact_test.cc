#include "core/redact.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "expr/expr.h"

namespace baton {
namespace {

TEST(RedactTest, SecretLookingKeys) {
  EXPECT_TRUE(IsSecretKey("DB_PASSWORD"));
  EXPECT_TRUE(IsSecretKey("github_token"));
  EXPECT_TRUE(IsSecretKey("AWS_SECRET_ACCESS_KEY"));
  EXPECT_TRUE(IsSecretKey("my_access_key"));
  EXPECT_FALSE(IsSecretKey("PATH"));
  EXPECT_FALSE(IsSecretKey("TOKE"));
}

TEST(RedactTest, CollectsSecretsAndSecretEnvValues) {
  Job job;
  job.secrets = {{"api", "s3cret-value"}};
  Task t;
  t.name = "t";
  t.env = {{"DB_PASSWORD", "hunter2"}, {"NAME", "visible"}};
  job.tasks = {t};
  auto values = SecretValues(job);
  EXPECT_EQ(values, (std::vector<std::string>{"s3cret-value", "hunter2"}));
}

TEST(RedactTest, ARecordsSecretsIncludeEnvTemplatesItsContextEvaluates) {
  // `API_TOKEN: "{{ inputs.token }}"`: the value to hide is the token, not the template.
  JobRecord record;
  Task t;
  t.name = "t";
  t.env = {{"API_TOKEN", "{{ inputs.token }}"},
           {"ITEM_TOKEN", "{{ item.value }}"},      // needs an each's item: left to rows
           {"NONCE_TOKEN", "n{{ randomInt(9) }}"},  // differs at each evaluation
           {"PLAIN", "{{ inputs.visible }}"}};
  record.job.tasks = {t};
  record.job.inputs = {{"token", "tok-12345"}, {"visible", "shown"}};
  record.context = {{"inputs", {{"token", "tok-12345"}, {"visible", "shown"}}},
                    {"secrets", nlohmann::json::object()},
                    {"tasks", nlohmann::json::object()},
                    {"job", {{"id", "x"}, {"name", "n"}}}};
  std::vector<std::string> values = SecretValues(record);
  EXPECT_NE(std::find(values.begin(), values.end(), "tok-12345"), values.end());
  EXPECT_EQ(std::find(values.begin(), values.end(), "shown"), values.end());
  EXPECT_EQ(RedactText("token=tok-12345", values), "token=[REDACTED]");
}

TEST(RedactTest, AnEvaluatedRowsSecretEnvValuesAreHidden) {
  Task row;
  row.env = {{"API_TOKEN", "tok-999"}, {"NAME", "visible"}};
  AuxTask pre;
  pre.env = {{"DB_PASSWORD", "pw-1"}};
  row.pre = {pre};
  row.registry = Registry{"user", "reg-pass"};
  std::vector<std::string> values;
  AddSecretValues(row, values);
  EXPECT_EQ(values, (std::vector<std::string>{"reg-pass", "tok-999", "pw-1"}));
  MergeSecretValues({"tok-999", "longer-secret"}, values);
  EXPECT_EQ(values, (std::vector<std::string>{"longer-secret", "reg-pass", "tok-999", "pw-1"}));
}

TEST(RedactTest, RegistryPasswordsOfStepsAndSidecarsAreHidden) {
  Task row;
  AuxTask pre;
  pre.registry = Registry{"u", "pre-pass"};
  AuxTask sidecar;
  sidecar.registry = Registry{"u", "sidecar-pass"};
  row.pre = {pre};
  row.sidecars = {sidecar};
  std::vector<std::string> values;
  AddSecretValues(row, values);
  EXPECT_THAT(values, ::testing::UnorderedElementsAre("pre-pass", "sidecar-pass"));
}

TEST(RedactTest, RedactsTextEverywhere) {
  EXPECT_EQ(RedactText("pw=hunter2 and hunter2!", {"hunter2"}), "pw=[REDACTED] and [REDACTED]!");
  EXPECT_EQ(RedactText("nothing here", {"hunter2"}), "nothing here");
  EXPECT_EQ(RedactText("abcabc", {"abc", "a"}), "[REDACTED][REDACTED]");
}

TEST(RedactTest, RedactsJsonBySecretsEnvKeysAndValues) {
  nlohmann::json j = {
      {"secrets", {{"api", "s3cret"}}},
      {"context", {{"secrets", {{"api", "s3cret"}}}, {"tasks", {{"out", "got s3cret back"}}}}},
      {"tasks",
       {{{"env", {{"MY_TOKEN", "{{ secrets.api }}"}, {"PLAIN", "s3cret"}, {"OK", "fine"}}}}}}};
  RedactJson(j, {"s3cret"});
  EXPECT_EQ(j["secrets"]["api"], "[REDACTED]");
  EXPECT_EQ(j["context"]["secrets"]["api"], "[REDACTED]");
  EXPECT_EQ(j["context"]["tasks"]["out"], "got [REDACTED] back");
  EXPECT_EQ(j["tasks"][0]["env"]["MY_TOKEN"], "[REDACTED]");
  EXPECT_EQ(j["tasks"][0]["env"]["PLAIN"], "[REDACTED]");
  EXPECT_EQ(j["tasks"][0]["env"]["OK"], "fine");
}

TEST(RedactTest, ASecretWrittenInTwoPartsIsHiddenWhole) {
  // `printf '%s' "${S:0:5}"; sleep 0.2; printf '%s\n' "${S:5}"`: two log parts.
  const std::vector<std::string> values = {"hunter2-s3cret"};
  StreamRedactor stream;
  std::string joined = stream.Next("pw=hunte", values);
  joined += stream.Next("r2-s3cret\n", values);
  joined += stream.Finish(values);
  EXPECT_EQ(joined, "pw=[REDACTED]\n");
}

TEST(RedactTest, APartEndsWhereNoSecretCanStillStart) {
  const std::vector<std::string> values = {"hunter2"};
  StreamRedactor stream;
  // "hun" may be the start of the secret: held; "xy" cannot.
  EXPECT_EQ(stream.Next("abc hun", values), "abc ");
  EXPECT_EQ(stream.held(), "hun");
  // Not the secret after all: shown as it was, with what follows.
  EXPECT_EQ(stream.Next("gry\n", values), "hungry\n");
  EXPECT_EQ(stream.held(), "");
  // A prefix left at the end of the stream is not the secret: shown at the end.
  EXPECT_EQ(stream.Next("hunt", values), "");
  EXPECT_EQ(stream.Finish(values), "hunt");
}

TEST(RedactTest, AWindowAcrossA32KiBReadBoundary) {
  const std::string secret(100, 'k');
  const std::vector<std::string> values = {"pre-" + secret + "-post"};
  std::string stream_text = std::string(32 * 1024 - 50, '.') + values[0] + "\nend\n";
  StreamRedactor stream;
  std::string joined;
  for (std::size_t at = 0; at < stream_text.size(); at += 32 * 1024) {
    joined += stream.Next(std::string_view(stream_text).substr(at, 32 * 1024), values);
  }
  joined += stream.Finish(values);
  EXPECT_EQ(joined, std::string(32 * 1024 - 50, '.') + "[REDACTED]\nend\n");
}

TEST(RedactTest, AStreamInAnyPartsRedactsAsTheJoinedText) {
  // Overlapping secrets, a secret that is a prefix of another, repeats: every way of
  // cutting the text gives what redacting it whole gives.
  const std::vector<std::string> values = {"abcdef", "cdxyz", "abc", "zz"};
  const std::string text = "abcdefabcdxyz abcdexyzz abcab zzz ab";
  const std::string whole = RedactText(text, values);
  EXPECT_EQ(whole.find("abc"), std::string::npos) << whole;
  EXPECT_EQ(whole.find("xyz"), std::string::npos) << whole;
  for (std::size_t a = 0; a <= text.size(); ++a) {
    for (std::size_t b = a; b <= text.size(); ++b) {
      StreamRedactor stream;
      std::string joined = stream.Next(text.substr(0, a), values);
      joined += stream.Next(text.substr(a, b - a), values);
      joined += stream.Next(text.substr(b), values);
      joined += stream.Finish(values);
      ASSERT_EQ(joined, whole) << "cut at " << a << " and " << b;
    }
  }
}

TEST(RedactTest, OverlappingOccurrencesAreHiddenWhole) {
  // Neither secret shows a piece of itself where they overlap.
  EXPECT_EQ(RedactText("xabcdef", {"xab", "abcdef"}), "[REDACTED]");
  EXPECT_EQ(RedactText("a-secret-a", {"secret"}), "a-[REDACTED]-a");
  // A secret that matches inside the placeholder does not mangle it.
  EXPECT_EQ(RedactText("pw RED", {"RED"}), "pw [REDACTED]");
}

TEST(RedactTest, APartDoesNotEndInsideAUtf8Character) {
  // "é" is 2 bytes and "€" 3: a read may end inside one.
  StreamRedactor stream;
  EXPECT_EQ(stream.Next("caf\xC3", {}), "caf");
  EXPECT_EQ(stream.Next("\xA9 \xE2\x82", {}), "\xC3\xA9 ");
  EXPECT_EQ(stream.Next("\xAC", {}), "\xE2\x82\xAC");
  // Invalid bytes at the end are not held for ever: shown at the end.
  EXPECT_EQ(stream.Next("\xF0", {}), "");
  EXPECT_EQ(stream.Finish({}), "\xF0");
}

TEST(RedactTest, ASecretWithMultiByteCharactersSplitInsideOne) {
  const std::vector<std::string> values = {"mot-de-passe-\xC3\xA9t\xC3\xA9"};
  StreamRedactor stream;
  std::string joined = stream.Next("x mot-de-passe-\xC3", values);
  joined += stream.Next("\xA9t\xC3\xA9 y", values);
  joined += stream.Finish(values);
  EXPECT_EQ(joined, "x [REDACTED] y");
}

// True when any 8 consecutive bytes of `secret` appear in `text`.
bool ShowsAPieceOf(const std::string& text, const std::string& secret) {
  for (std::size_t i = 0; i + 8 <= secret.size(); ++i) {
    if (text.find(secret.substr(i, 8)) != std::string::npos) return true;
  }
  return false;
}

TEST(RedactTest, ALongSecretIsNotQuotedInExpressionErrors) {
  // An error text truncates what it quotes: the piece would not match the whole secret.
  const std::string secret =
      "Zq" + std::string(40, 'x') + "-tail-of-a-long-secret-" + std::string(40, 'y');
  const nlohmann::json vars = {{"secrets", {{"long", secret}}}};
  for (const char* text :
       {"{{ int(secrets.long) }}", "{{ float(secrets.long) }}", "{{ fromJSON(secrets.long) }}",
        "{{ fromJSON('[' + secrets.long) }}", "{{ int(secrets.long[3:90]) }}"}) {
    auto value = expr::EvaluateTemplate(text, vars);
    ASSERT_FALSE(value.ok()) << text;
    const std::string shown = RedactText(value.status().message(), {secret});
    EXPECT_FALSE(ShowsAPieceOf(shown, secret)) << text << ": " << shown;
  }
}

}  // namespace
}  // namespace baton
