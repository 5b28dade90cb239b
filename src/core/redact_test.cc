#include "core/redact.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

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
      {"tasks", {{{"env", {{"MY_TOKEN", "{{ secrets.api }}"}, {"PLAIN", "s3cret"}, {"OK", "fine"}}}}}}};
  RedactJson(j, {"s3cret"});
  EXPECT_EQ(j["secrets"]["api"], "[REDACTED]");
  EXPECT_EQ(j["context"]["secrets"]["api"], "[REDACTED]");
  EXPECT_EQ(j["context"]["tasks"]["out"], "got [REDACTED] back");
  EXPECT_EQ(j["tasks"][0]["env"]["MY_TOKEN"], "[REDACTED]");
  EXPECT_EQ(j["tasks"][0]["env"]["PLAIN"], "[REDACTED]");
  EXPECT_EQ(j["tasks"][0]["env"]["OK"], "fine");
}

}  // namespace
}  // namespace baton
