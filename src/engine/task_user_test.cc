#include "engine/task_user.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace baton {
namespace {

constexpr uid_t kSelf = 1000;

TEST(TaskUserTest, SingleUserWithoutAuthenticationRunsTasksAsBatonsOwnUser) {
  Config config;
  auto user = ResolveTaskUser(config, kSelf, /*can_switch=*/false);
  ASSERT_TRUE(user.ok()) << user.status().message();
  EXPECT_FALSE(user->has_value());
}

TEST(TaskUserTest, WithAuthenticationOnTasksRunAsNobodyByDefault) {
  Config config;
  config.api_auth_enabled = true;
  auto user = ResolveTaskUser(config, 0, /*can_switch=*/true);
  ASSERT_TRUE(user.ok()) << user.status().message();
  ASSERT_TRUE(user->has_value());
  EXPECT_EQ((*user)->uid, 65534u);
}

TEST(TaskUserTest, WithAuthenticationOnAProcessThatCannotSwitchUsersIsAStartUpError) {
  Config config;
  config.tork_basicauth_enabled = true;
  auto user = ResolveTaskUser(config, kSelf, /*can_switch=*/false);
  ASSERT_FALSE(user.ok());
  EXPECT_EQ(user.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(user.status().message().find("api.auth.enabled"), std::string::npos)
      << user.status().message();
  EXPECT_NE(user.status().message().find("cannot switch users"), std::string::npos)
      << user.status().message();
}

TEST(TaskUserTest, WithAuthenticationOnBatonsOwnUidIsRefused) {
  Config config;
  config.api_auth_enabled = true;
  config.shell_uid = std::to_string(kSelf);
  config.shell_gid = "1000";
  auto user = ResolveTaskUser(config, kSelf, /*can_switch=*/true);
  ASSERT_FALSE(user.ok());
  EXPECT_NE(user.status().message().find("runtime.shell.uid is 1000, Baton's own user"),
            std::string::npos)
      << user.status().message();
}

TEST(TaskUserTest, UidAndGidAreNumbersOrNames) {
  Config config;
  config.shell_uid = "nobody";
  auto named = ResolveTaskUser(config, 0, /*can_switch=*/true);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ((*named)->uid, 65534u);
  config.shell_uid = "4242";
  config.shell_gid = "4343";
  auto numbers = ResolveTaskUser(config, 0, /*can_switch=*/true);
  ASSERT_TRUE(numbers.ok()) << numbers.status().message();
  EXPECT_EQ((*numbers)->uid, 4242u);
  EXPECT_EQ((*numbers)->gid, 4343u);
}

TEST(TaskUserTest, BadUsersAndGroupsNameTheKey) {
  Config config;
  config.shell_uid = "no-such-user-here";
  EXPECT_EQ(ResolveTaskUser(config, 0, true).status().message(),
            "runtime.shell.uid: no user \"no-such-user-here\" on this host");
  config.shell_uid = "4242";
  EXPECT_EQ(ResolveTaskUser(config, 0, true).status().message(),
            "runtime.shell.uid is the number 4242: set runtime.shell.gid too");
  config.shell_gid = "no-such-group-here";
  EXPECT_EQ(ResolveTaskUser(config, 0, true).status().message(),
            "runtime.shell.gid: no group \"no-such-group-here\" on this host");
  config.shell_uid.clear();
  EXPECT_EQ(ResolveTaskUser(config, 0, true).status().message(),
            "runtime.shell.gid is set without runtime.shell.uid: set both");
  config.shell_uid = "4242";
  config.shell_gid = "4242";
  auto not_root = ResolveTaskUser(config, kSelf, /*can_switch=*/false);
  EXPECT_NE(not_root.status().message().find("runtime.shell.uid: tasks would run as uid 4242"),
            std::string::npos)
      << not_root.status().message();
}

TEST(TaskUserTest, EveryDirectoryAboveTheDataDirectoryMustLetTheTaskUserSearchIt) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("baton-task-user-" + std::to_string(getpid()));
  fs::create_directories(root / "closed" / "data");
  ASSERT_EQ(::chmod(root.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((root / "closed").c_str(), 0700), 0);
  const TaskUser other{4242, 4242};
  Status closed = CheckTaskUserCanReach((root / "closed" / "data").string(), other);
  EXPECT_EQ(closed.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(closed.message().find((root / "closed").string() + " (mode 700"), std::string::npos)
      << closed.message();
  ASSERT_EQ(::chmod((root / "closed").c_str(), 0711), 0);
  Status open = CheckTaskUserCanReach((root / "closed" / "data").string(), other);
  EXPECT_TRUE(open.ok()) << open.message();
  fs::remove_all(root);
}

}  // namespace
}  // namespace baton
