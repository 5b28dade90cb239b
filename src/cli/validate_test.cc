#include "cli/validate.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace baton::cli {
namespace {

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton-validate-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST_F(ValidateTest, ValidFilesExitZero) {
  std::string a = Write("a.yaml", "name: a\ntasks:\n  - {name: t, run: echo}\n");
  std::string b = Write("b.json", R"({"name":"b","tasks":[{"name":"t","run":"echo"}]})");
  std::ostringstream out, err;
  EXPECT_EQ(Validate({a, b}, out, err), kExitOk);
  EXPECT_EQ(out.str(), a + ": ok\n" + b + ": ok\n");
  EXPECT_EQ(err.str(), "");
}

TEST_F(ValidateTest, ADocumentWithAScheduleIsValidatedAsAScheduledJob) {
  std::string ok =
      Write("s.yaml", "name: s\nschedule: {cron: '@hourly'}\ntasks:\n  - {name: t, run: echo}\n");
  std::string bad = Write(
      "b.yaml", "name: b\nschedule:\n  cron: '61 * * * *'\ntasks:\n  - {name: t, run: echo}\n");
  std::ostringstream out, err;
  EXPECT_EQ(Validate({ok, bad}, out, err), kExitFailure);
  EXPECT_EQ(out.str(), ok + ": ok\n");
  EXPECT_EQ(err.str(), bad + ":3:9: schedule.cron: cron: minute: 61 is out of range 0-59\n");
}

TEST_F(ValidateTest, ProblemsArePrintedWithFileLineAndColumn) {
  std::string bad =
      Write("bad.yml", "name: bad\ntasks:\n  - name: t\n    run: x\n    priority: 10\n");
  std::ostringstream out, err;
  EXPECT_EQ(Validate({bad}, out, err), kExitFailure);
  EXPECT_EQ(err.str(), bad + ":5:15: tasks[0].priority: must be between 0 and 9, got 10\n");
}

TEST_F(ValidateTest, FormatFollowsTheExtension) {
  // Valid YAML flow syntax, but not JSON: a .json file must be read as JSON.
  std::string f = Write("flow.json", "{name: j, tasks: [{name: t, run: echo}]}");
  std::ostringstream out, err;
  EXPECT_EQ(Validate({f}, out, err), kExitFailure);
  EXPECT_NE(err.str().find("JSON syntax error"), std::string::npos) << err.str();
}

TEST_F(ValidateTest, UnreadableFileIsAUsageError) {
  std::ostringstream out, err;
  EXPECT_EQ(Validate({(dir_ / "missing.yaml").string()}, out, err), kExitUsage);
  EXPECT_NE(err.str().find("cannot read: No such file or directory"), std::string::npos);
}

TEST_F(ValidateTest, PlanPrintsAValidJobsStagesAsTextDotOrJson) {
  std::string dag = Write("dag.yaml",
                          "name: d\nmode: dag\ntasks:\n  - {name: a, run: x}\n"
                          "  - {name: b, run: x, needs: [a]}\n  - {name: c, run: x, needs: [a]}\n");
  std::ostringstream text, dot, json, err;
  EXPECT_EQ(Validate({dag}, text, err, PlanFormat::kText), kExitOk);
  EXPECT_EQ(text.str(),
            "plan of d (dag graph, 3 tasks in 2 stages)\n"
            "stage 1: a\n"
            "stage 2: b, c  (at once)\n"
            "- a (runnable); its failure skips b, c\n"
            "- b (runnable): needs a (all_success); its failure skips nothing\n"
            "- c (runnable): needs a (all_success); its failure skips nothing\n");
  EXPECT_EQ(Validate({dag}, dot, err, PlanFormat::kDot), kExitOk);
  EXPECT_NE(dot.str().find("\"a\" -> \"c\";"), std::string::npos) << dot.str();
  EXPECT_EQ(Validate({dag}, json, err, PlanFormat::kJson), kExitOk);
  EXPECT_NE(json.str().find("\"stages\": ["), std::string::npos) << json.str();
  EXPECT_EQ(err.str(), "");
}

TEST_F(ValidateTest, PlanOfAnInvalidJobPrintsItsProblemsOnly) {
  std::string bad =
      Write("cycle.yaml", "name: d\nmode: dag\ntasks:\n  - {name: a, run: x, needs: [a]}\n");
  std::ostringstream out, err;
  EXPECT_EQ(Validate({bad}, out, err, PlanFormat::kText), kExitFailure);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(),
            bad + ":4:23: tasks[0].needs: the tasks' needs form a cycle: \"a\" -> \"a\"\n");
}

}  // namespace
}  // namespace baton::cli
