#include "core/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/job_decode.h"
#include "core/record_json.h"

namespace baton {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Job WithPermissions(std::vector<Permission> permissions, std::string created_by = "") {
  Job job;
  job.name = "j";
  job.permissions = std::move(permissions);
  job.created_by = std::move(created_by);
  return job;
}

TEST(AuthTest, AJobWithoutPermissionsIsVisibleToEveryUser) {
  EXPECT_TRUE(MayAccess({"bob", {}}, WithPermissions({}, "ann")));
}

TEST(AuthTest, AJobWithPermissionsIsVisibleToTheUsersAndRolesItNamesOnly) {
  Job job = WithPermissions({{"ops", ""}, {"", "carl"}}, "ann");
  EXPECT_TRUE(MayAccess({"carl", {}}, job));              // named user
  EXPECT_TRUE(MayAccess({"dora", {"dev", "ops"}}, job));  // member of a named role
  EXPECT_TRUE(MayAccess({"ann", {}}, job));               // its creator
  EXPECT_FALSE(MayAccess({"bob", {"dev"}}, job));         // none of these
  EXPECT_FALSE(MayAccess({"ops", {}}, job));  // a user named like a role is not the role
}

TEST(AuthTest, AnAdminSeesEveryJob) {
  EXPECT_TRUE(MayAccess({"root", {"admin"}}, WithPermissions({{"", "ann"}})));
  EXPECT_TRUE((Principal{"x", {"dev", "admin"}}.admin()));
  EXPECT_FALSE((Principal{"admin", {"dev"}}.admin()));
}

TEST(AuthTest, AccessTextListsEachPermissionOnceAndMatchesTheTermsOfThoseItNames) {
  Job job = WithPermissions({{"ops", ""}, {"", "carl"}, {"ops", ""}});
  EXPECT_EQ(AccessText(job), "|r:ops|u:carl|");
  EXPECT_EQ(AccessText(WithPermissions({})), "");
  EXPECT_THAT(AccessTerms({"carl", {"dev"}}), ElementsAre("|u:carl|", "|r:dev|"));
  // A term of one user never matches inside another's name: the bars delimit it.
  EXPECT_EQ(AccessText(WithPermissions({{"", "carla"}})).find("|u:carl|"), std::string::npos);
}

TEST(AuthTest, NamesAreLettersDigitsAndFewPunctuation) {
  EXPECT_TRUE(ValidateName("username", "ann.o_brien@x-y").ok());
  EXPECT_THAT(ValidateName("username", "").message(), HasSubstr("must not be empty"));
  EXPECT_THAT(ValidateName("username", "a|b").message(), HasSubstr("may hold only"));
  EXPECT_THAT(ValidateName("username", std::string(65, 'a')).message(),
              HasSubstr("the limit is 64"));
}

TEST(AuthTest, ASubmissionMayNotNameItsCreatorButAStoredJobKeepsIt) {
  auto submitted =
      DecodeJobJson(R"({"name":"j","createdBy":"eve","tasks":[{"name":"t","run":"x"}]})");
  ASSERT_FALSE(submitted.ok());
  EXPECT_THAT(submitted.status().message(), HasSubstr("createdBy: is set by the server"));
  auto stored = DecodeJobJson(R"({"name":"j","createdBy":"ann","tasks":[{"name":"t","run":"x"}]})",
                              DecodeMode::kStored);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->created_by, "ann");
}

TEST(AuthTest, APermissionNamingAnImpossibleUserIsRefusedAtSubmission) {
  auto job = DecodeJobJson(
      R"({"name":"j","permissions":[{"user":"a|b"}],"tasks":[{"name":"t","run":"x"}]})");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("permissions[0].user"));
}

TEST(AuthTest, AJobShowsItsCreatorAsTorkDoesAndItsPermissions) {
  JobRecord record;
  record.id = std::string(32, 'a');
  record.job = WithPermissions({{"ops", ""}}, "ann");
  nlohmann::json summary = ToJson(record, /*summary=*/true);
  EXPECT_EQ(summary["createdBy"], (nlohmann::json{{"username", "ann"}}));
  EXPECT_FALSE(summary.contains("permissions"));
  nlohmann::json full = ToJson(record, /*summary=*/false);
  EXPECT_EQ(full["permissions"], nlohmann::json::parse(R"([{"role":"ops"}])"));
}

}  // namespace
}  // namespace baton
