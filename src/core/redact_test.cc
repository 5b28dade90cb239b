#include "core/redact.h"

#include <gtest/gtest.h>

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
