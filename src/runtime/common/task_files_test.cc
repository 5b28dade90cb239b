#include "runtime/common/task_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace baton::runtime {
namespace {

using ::testing::HasSubstr;

class TaskFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton-task-files-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const char* name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(TaskFilesTest, ReadsTheResultAndRefusesWhatIsNotARegularFileOrTooLarge) {
  auto missing = ReadResultFile(Path("none"), 10);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->state, RunOutcome::State::kCompleted);
  EXPECT_EQ(missing->result, "");

  ASSERT_TRUE(WriteWholeFile(Path("out"), "hello", 0600).ok());
  auto read = ReadResultFile(Path("out"), 10);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->result, "hello");

  auto big = ReadResultFile(Path("out"), 4);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->state, RunOutcome::State::kFailed);
  EXPECT_EQ(big->error, "result is 5 bytes, over the 4-byte limit");

  std::filesystem::create_symlink(Path("out"), Path("link"));
  auto link = ReadResultFile(Path("link"), 10);
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->error, "$BATON_OUTPUT is not a regular file");

  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  auto fifo = ReadResultFile(Path("fifo"), 10);  // must not block
  ASSERT_TRUE(fifo.ok());
  EXPECT_EQ(fifo->error, "$BATON_OUTPUT is not a regular file");
}

TEST_F(TaskFilesTest, WriteWholeFileSetsTheModeWhateverTheUmask) {
  mode_t old = umask(077);
  Status s = WriteWholeFile(Path("f"), "x", 0644);
  umask(old);
  ASSERT_TRUE(s.ok()) << s.message();
  struct stat st {};
  ASSERT_EQ(stat(Path("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(TaskFilesTest, ProgressIsANumberClampedToAPercentage) {
  EXPECT_EQ(ParseProgress(" 42.5\n"), 42.5);
  EXPECT_EQ(ParseProgress("150"), 100.0);
  EXPECT_EQ(ParseProgress("-3"), 0.0);
  EXPECT_EQ(ParseProgress("soon"), std::nullopt);
  EXPECT_EQ(ParseProgress("nan"), std::nullopt);
  EXPECT_EQ(ReadProgressFile(Path("none")), std::nullopt);
  ASSERT_TRUE(WriteWholeFile(Path("p"), "7\n", 0600).ok());
  EXPECT_EQ(ReadProgressFile(Path("p")), 7.0);
}

TEST(TaskFilesNamesTest, NamesAndErrors) {
  EXPECT_TRUE(ValidFileName("script.sh"));
  EXPECT_FALSE(ValidFileName("a/b"));
  EXPECT_FALSE(ValidFileName(".."));
  EXPECT_FALSE(ValidFileName(".baton-output"));
  EXPECT_FALSE(ValidEnvName("A=B"));
  EXPECT_TRUE(ValidEnvName("PATH"));
  EXPECT_EQ(NamePart("ab/c.d", 64), "ab_c_d");
  EXPECT_EQ(NamePart("abcdef", 3), "abc");
  EXPECT_EQ(NamePart("", 3), "task");
  EXPECT_EQ(LastLines("a\nb\nc\n", 2), "b\nc");
  EXPECT_EQ(LastLines(std::string(5000, 'x'), 1).size(), 2048u);
  EXPECT_EQ(StepError("pre[0]", "exit code 1", "one\ntwo\n", 1), "pre[0] failed: exit code 1\ntwo");
  EXPECT_EQ(StepError("", "cancelled", "one\n", 5, /*with_output=*/false), "cancelled");
  EXPECT_THAT(ErrnoStatus("cannot open x", ENOENT).message(), HasSubstr("cannot open x: "));
  EXPECT_EQ(ErrnoStatus("x", ENOMEM).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace baton::runtime
