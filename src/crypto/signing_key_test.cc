#include "crypto/signing_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace baton::crypto {
namespace {

class SigningKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton-signing-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SigningKeyTest, TheFirstReadMakesAPrivateKeyThatLaterReadsReturn) {
  const std::string path = (dir_ / "webhooks.key").string();
  bool created = false;
  auto first = ReadOrCreateSigningKey(path, &created);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(created);
  EXPECT_EQ(first->size(), 64u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto again = ReadOrCreateSigningKey(path, &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(*again, *first);
  EXPECT_NE(*ReadOrCreateSigningKey((dir_ / "other.key").string(), &created), *first);
}

TEST_F(SigningKeyTest, AFileWithoutAKeyIsAnErrorNamingIt) {
  const std::string path = (dir_ / "webhooks.key").string();
  std::ofstream(path) << "# only a comment\n";
  bool created = false;
  auto key = ReadOrCreateSigningKey(path, &created);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().message(), path + " holds no key (a line that is not a comment)");
}

}  // namespace
}  // namespace baton::crypto
