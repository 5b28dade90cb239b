#include "engine/data_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace baton {
namespace {

namespace fs = std::filesystem;

int ModeOf(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("baton-data-dir-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(DataDirTest, CreatesTheDirectoryPrivateToItsOwner) {
  const mode_t old_umask = ::umask(022);
  Status made = SecureDataDir((root_ / "a" / "data").string());
  ::umask(old_umask);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(ModeOf(root_ / "a" / "data"), 0700);
}

TEST_F(DataDirTest, TightensALooserDirectoryAndWhatItHoldsAndSaysWhat) {
  const fs::path dir = root_ / "data";
  fs::create_directories(dir / "tasks");
  std::ofstream(dir / "baton.db") << "x";
  std::ofstream(dir / "secrets.key") << "x";
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir / "tasks").c_str(), 0775), 0);
  ASSERT_EQ(::chmod((dir / "baton.db").c_str(), 0644), 0);
  ASSERT_EQ(::chmod((dir / "secrets.key").c_str(), 0600), 0);
  std::vector<std::string> tightened;
  Status made = SecureDataDir(dir.string(), &tightened);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(ModeOf(dir), 0700);
  EXPECT_EQ(ModeOf(dir / "tasks"), 0700);
  EXPECT_EQ(ModeOf(dir / "baton.db"), 0600);
  EXPECT_EQ(ModeOf(dir / "secrets.key"), 0600);
  std::sort(tightened.begin(), tightened.end());
  EXPECT_EQ(tightened, (std::vector<std::string>{dir.string(), (dir / "baton.db").string(),
                                                 (dir / "tasks").string()}));
}

TEST_F(DataDirTest, RefusesWhatIsNotADirectoryNamingIt) {
  std::ofstream(root_ / "file") << "x";
  Status made = SecureDataDir((root_ / "file").string());
  EXPECT_EQ(made.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(made.message().find((root_ / "file").string()), std::string::npos) << made.message();
}

TEST_F(DataDirTest, RefusesADirectoryOfAnotherUser) {
  // Only root can give a directory away; as another user, a directory of root's stands in.
  fs::path dir = "/";
  if (::geteuid() == 0) {
    dir = root_ / "theirs";
    fs::create_directories(dir);
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  }
  Status made = SecureDataDir(dir.string());
  EXPECT_EQ(made.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(made.message().find("belongs to uid"), std::string::npos) << made.message();
  EXPECT_NE(made.message().find(dir.string()), std::string::npos) << made.message();
}

}  // namespace
}  // namespace baton
