#include "datastore/sql/secrets.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "datastore/sql/rows.h"

namespace baton::sql {
namespace {

crypto::Keyring Ring() { return *crypto::Keyring::Make({*crypto::GenerateKey()}); }

// A job with a secret in every place secrets.h lists, at every depth (parallel, each,
// sub-job, steps and sidecars), each a distinct value pushed onto `values`.
Job EverySecret(std::vector<std::string>& values) {
  auto v = [&](const std::string& what) {
    values.push_back(std::string("plain-") + what);
    return values.back();
  };
  auto runnable = [&](const char* name) {
    Task t;
    t.name = name;
    t.run = "true";
    // A key that does not look secret holds one too (`DB: "{{ secrets.db }}"`).
    t.env = {{"API_TOKEN", v(name)}, {"DB", v(std::string("db-") + name)}};
    return t;
  };
  Job job;
  job.name = "every secret";
  job.secrets = {{"a", v("job-secret")}};
  Webhook hook;
  hook.url = "http://127.0.0.1/h";
  hook.secret = v("job-hook");
  job.webhooks = {hook};
  Task top = runnable("top");
  top.registry = Registry{"u", v("top-registry")};
  AuxTask step;
  step.name = "step";
  step.env = {{"STEP_PASSWORD", v("step-env")}};
  step.registry = Registry{"u", v("step-registry")};
  top.pre = {step};
  step.env = {{"POST_SECRET", v("post-env")}};
  step.registry.reset();
  top.post = {step};
  step.env = {{"SIDE_ACCESS_KEY", v("sidecar-env")}};
  top.sidecars = {step};
  Task parallel;
  parallel.name = "parallel";
  parallel.parallel = Parallel{{runnable("in-parallel")}};
  Task each;
  each.name = "each";
  each.each = Each{};
  each.each->list = "{{ [1] }}";
  *each.each->task = runnable("in-each");
  Task sub;
  sub.name = "sub";
  sub.subjob = SubJob{};
  sub.subjob->name = "inner";
  sub.subjob->secrets = {{"s", v("subjob-secret")}};
  hook.secret = v("subjob-hook");
  sub.subjob->webhooks = {hook};
  sub.subjob->tasks = {runnable("in-subjob")};
  job.tasks = {top, parallel, each, sub};
  return job;
}

TEST(SecretsTest, EveryListedValueIsSealedInTheStoredTextAndDecodesBack) {
  const crypto::Keyring keys = Ring();
  std::vector<std::string> values;
  const Job job = EverySecret(values);
  ASSERT_TRUE(HasSecrets(job));
  Result<std::string> text = EncodeJob(job, &keys);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  for (const std::string& value : values) {
    EXPECT_EQ(text->find(value), std::string::npos) << value << " in " << *text;
  }
  EXPECT_NE(text->find("every secret"), std::string::npos);  // only secret values are sealed
  Result<Job> back = DecodeStoredJob(*text, &keys);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, job);

  // A task row alone, likewise.
  Result<std::string> task_text = EncodeTask(job.tasks[0], &keys);
  ASSERT_TRUE(task_text.ok());
  EXPECT_EQ(task_text->find("plain-top"), std::string::npos);
  EXPECT_EQ(*DecodeStoredTask(*task_text, &keys), job.tasks[0]);
}

TEST(SecretsTest, WithoutKeysValuesAreStoredAsTheyAreAndAJobWithoutSecretsIsUnchanged) {
  std::vector<std::string> values;
  const Job job = EverySecret(values);
  Result<std::string> plain = EncodeJob(job, nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->find("plain-job-secret"), std::string::npos);
  EXPECT_EQ(*DecodeStoredJob(*plain, nullptr), job);

  Job none;
  none.name = "no secrets";
  Task t;
  t.name = "t";
  t.run = "true";
  t.env = {{"EMPTY_TOKEN", ""}};
  none.tasks = {t};
  EXPECT_FALSE(HasSecrets(none));  // empty values stay empty
  const crypto::Keyring keys = Ring();
  EXPECT_EQ(*EncodeJob(none, &keys), *EncodeJob(none, nullptr));
}

TEST(SecretsTest, AContextHasOnlyItsSecretsSealedAndIsOtherwiseDumpedAsJsonDoes) {
  const crypto::Keyring keys = Ring();
  const nlohmann::json context = {{"inputs", {{"who", "world"}}},
                                  {"secrets", {{"db", "plain-context"}, {"n", 3}}},
                                  {"tasks", {{"secrets", "a task named secrets"}}}};
  Result<std::string> text = EncodeContext(context, &keys);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("plain-context"), std::string::npos);
  EXPECT_NE(text->find("a task named secrets"), std::string::npos);
  Result<nlohmann::json> back = DecodeStoredContext(*text, &keys);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, context);
  EXPECT_EQ(*EncodeContext(context, nullptr), context.dump());
  nlohmann::json no_secrets = {{"inputs", nlohmann::json::object()}};
  EXPECT_EQ(*EncodeContext(no_secrets, &keys), no_secrets.dump());
}

TEST(SecretsTest, DecryptingCountsValuesNotUnderThePrimaryKeyAsStale) {
  const crypto::Key old_key = *crypto::GenerateKey(), new_key = *crypto::GenerateKey();
  const crypto::Keyring old_ring = *crypto::Keyring::Make({old_key});
  const crypto::Keyring both = *crypto::Keyring::Make({new_key, old_key});
  std::string under_old = *old_ring.Encrypt("x");
  std::string under_new = *both.Encrypt("y");
  std::string plain = "z";
  std::string empty;
  SecretsSeen seen;
  ASSERT_TRUE(DecryptValue(under_old, &both, &seen).ok());
  ASSERT_TRUE(DecryptValue(under_new, &both, &seen).ok());
  ASSERT_TRUE(DecryptValue(plain, &both, &seen).ok());
  ASSERT_TRUE(DecryptValue(empty, &both, &seen).ok());
  EXPECT_EQ(seen.stale, 2);  // the old key's and the plain one
  EXPECT_EQ(under_old, "x");
  EXPECT_EQ(under_new, "y");
  EXPECT_EQ(plain, "z");
}

TEST(SecretsTest, AnEncryptedValueReadWithoutKeysNamesTheConfigurationKeys) {
  const crypto::Keyring keys = Ring();
  std::string value = *keys.Encrypt("plain-value");
  Status status = DecryptValue(value, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("datastore.encryption.key"), std::string::npos);
  EXPECT_NE(status.message().find(keys.primary_id()), std::string::npos);
  EXPECT_EQ(status.message().find("plain-value"), std::string::npos);
}

}  // namespace
}  // namespace baton::sql
