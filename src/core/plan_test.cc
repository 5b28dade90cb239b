#include "core/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/job_decode.h"

namespace baton {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

Job Parse(std::string_view yaml) {
  JobParseResult parsed = ParseJob(yaml, DocumentFormat::kYaml);
  EXPECT_TRUE(parsed.ok()) << parsed.Message();
  return parsed.job.value_or(Job{});
}

constexpr std::string_view kDiamond = R"(
name: diamond
mode: dag
tasks:
  - {name: a, run: x}
  - {name: b, run: x, needs: [a]}
  - {name: c, run: x, needs: [a], retry: {limit: 2}}
  - {name: d, run: x, needs: [b, c]}
  - {name: alert, run: x, needs: [b, c], triggerRule: one_failed}
  - {name: solo, run: x}
)";

TEST(PlanTest, ADiamondsStagesRunItsMiddleAtOnce) {
  json plan = PlanOf(Parse(kDiamond));
  EXPECT_EQ(plan["graph"], true);
  EXPECT_EQ(plan["stages"], json::parse(R"([["a", "solo"], ["b", "c"], ["d", "alert"]])"));
  EXPECT_EQ(plan["tasks"][3]["needs"], json::parse(R"(["b", "c"])"));
  EXPECT_EQ(plan["tasks"][4]["triggerRule"], "one_failed");
}

TEST(PlanTest, EachTasksFailureSkipsWhatCanNoLongerRun) {
  json plan = PlanOf(Parse(kDiamond));
  // a's failure skips b, c and d (all_success over what a failure skipped); alert
  // (one_failed: b and c were skipped, neither failed) is skipped too, but it is when
  // nothing fails: not a's failure's doing. solo needs nothing.
  EXPECT_EQ(plan["tasks"][0]["failureSkips"], json::parse(R"(["b", "c", "d"])"));
  // b's failure skips only d: alert runs on it.
  EXPECT_EQ(plan["tasks"][1]["failureSkips"], json::parse(R"(["d"])"));
  EXPECT_EQ(plan["tasks"][5]["failureSkips"], json::array());
}

TEST(PlanTest, InATorkSequenceAFailureFailsTheJob) {
  json plan = PlanOf(Parse("name: s\ntasks:\n  - {name: a, run: x}\n  - {name: b, run: x}\n"));
  EXPECT_EQ(plan["graph"], false);
  EXPECT_EQ(plan["stages"], json::parse(R"([["a"], ["b"]])"));
  EXPECT_EQ(plan["tasks"][1]["needs"], json::parse(R"(["a"])"));
  EXPECT_EQ(plan["tasks"][0]["failureFailsTheJob"], true);
}

TEST(PlanTest, CompositesArePlannedInside) {
  json plan = PlanOf(Parse(R"(
name: nested
tasks:
  - name: p
    parallel: {tasks: [{name: x, run: x}, {name: y, run: x}]}
  - name: e
    each: {list: "{{ [1, 2] }}", concurrency: 1, task: {name: z, run: x}}
  - name: s
    subjob:
      name: inner
      mode: dag
      tasks: [{name: i, run: x}, {name: j, run: x}]
)"));
  EXPECT_EQ(plan["tasks"][0]["tasks"].size(), 2u);
  EXPECT_EQ(plan["tasks"][1]["each"]["concurrency"], 1);
  EXPECT_EQ(plan["tasks"][2]["subjob"]["stages"], json::parse(R"([["i", "j"]])"));
}

TEST(PlanTest, AParallelWithNeedsIsPlannedAsAGraphInside) {
  json plan = PlanOf(Parse(R"(
name: fan
tasks:
  - name: p
    parallel:
      tasks:
        - {name: fetch, run: x}
        - {name: lint, run: x}
        - {name: build, run: x, needs: [fetch]}
        - {name: report, run: x, needs: [build, lint], triggerRule: all_done}
)"));
  const json& p = plan["tasks"][0];
  EXPECT_EQ(p["graph"], true);
  EXPECT_EQ(p["stages"], json::parse(R"([["fetch", "lint"], ["build"], ["report"]])"));
  EXPECT_EQ(p["tasks"][2]["needs"], json::parse(R"(["fetch"])"));
  EXPECT_EQ(p["tasks"][0]["failureSkips"], json::parse(R"(["build"])"));
  std::string text = PlanText(plan);
  EXPECT_THAT(text, HasSubstr("- p (parallel); its failure fails the job\n"
                              "    its tasks by their needs:\n"
                              "      stage 1: fetch, lint  (at once)\n"));
  EXPECT_THAT(text, HasSubstr("      - report (runnable): needs build, lint (all_done)"));
  std::string dot = PlanDot(plan);
  EXPECT_THAT(dot, HasSubstr("label=\"p (by needs)\""));
  EXPECT_THAT(dot, HasSubstr("\"p/fetch\" -> \"p/build\";"));
  EXPECT_THAT(dot, HasSubstr("\"p/lint\" -> \"p/report\" [label=\"all_done\"];"));
}

TEST(PlanTest, TextAndDotShowStagesEdgesAndRules) {
  json plan = PlanOf(Parse(kDiamond));
  std::string text = PlanText(plan);
  EXPECT_THAT(text, HasSubstr("plan of diamond (dag graph, 6 tasks in 3 stages)"));
  EXPECT_THAT(text, HasSubstr("stage 2: b, c  (at once)"));
  EXPECT_THAT(text, HasSubstr("- alert (runnable): needs b, c (one_failed); its failure skips "
                              "nothing"));
  EXPECT_THAT(text, HasSubstr("- c (runnable): needs a (all_success); retried up to 2 times; its "
                              "failure skips d"));
  std::string dot = PlanDot(plan);
  EXPECT_THAT(dot, HasSubstr("digraph \"diamond\" {"));
  EXPECT_THAT(dot, HasSubstr("\"a\" -> \"b\";"));
  EXPECT_THAT(dot, HasSubstr("\"b\" -> \"alert\" [label=\"one_failed\"];"));
}

TEST(PlanTest, ASwitchAndALoopArePlannedWithTheirBranchesAndTheirStop) {
  json plan = PlanOf(Parse(R"(
name: j
tasks:
  - name: by kind
    switch:
      value: "{{ tasks.kind }}"
      cases:
        csv: [{name: parse, run: x}, {name: load, run: x}]
        json: []
      default: [{name: other, run: x}]
  - name: poll
    loop:
      max: 5
      until: "{{ tasks.s == 'ok' }}"
      tasks: [{name: check, run: x}]
)"));
  const json& sw = plan["tasks"][0];
  EXPECT_EQ(sw["kind"], "switch");
  EXPECT_EQ(sw["switch"]["cases"]["csv"][1]["name"], "load");
  EXPECT_EQ(sw["switch"]["cases"]["json"], json::array());
  EXPECT_EQ(sw["switch"]["default"][0]["name"], "other");
  const json& loop = plan["tasks"][1];
  EXPECT_EQ(loop["kind"], "loop");
  EXPECT_EQ(loop["loop"]["max"], 5);
  EXPECT_EQ(loop["loop"]["until"], "{{ tasks.s == 'ok' }}");
  std::string text = PlanText(plan);
  EXPECT_THAT(text, HasSubstr("    on the value of {{ tasks.kind }}:\n"
                              "      \"csv\": parse, then load\n"
                              "      \"json\": nothing\n"
                              "      otherwise: other\n"));
  EXPECT_THAT(text, HasSubstr("    repeat check (until {{ tasks.s == 'ok' }}, at most 5 times)\n"));
  std::string dot = PlanDot(plan);
  EXPECT_THAT(dot, HasSubstr("\"by kind\" -> \"by kind/csv/parse\" [label=\"csv\"];"));
  EXPECT_THAT(dot, HasSubstr("\"by kind/csv/parse\" -> \"by kind/csv/load\";"));
  EXPECT_THAT(
      dot, HasSubstr("\"poll/each iteration/check\" -> \"poll\" [label=\"again\", style=dashed];"));
}

TEST(PlanTest, AFallbackAndAJobsCleanupArePlannedAndSaid) {
  json plan = PlanOf(Parse(R"(
name: cleanup
tasks:
  - name: fetch
    run: x
    onFailure:
      then: continue
      tasks: [{name: cached, run: y}, {name: note, run: z}]
  - {name: flaky, run: x, optional: true}
  - {name: report, run: x}
onFailure: [{name: page, run: x}]
finally: [{name: tidy, run: x}, {name: unlock, run: x}]
)"));
  EXPECT_EQ(plan["tasks"][0]["onFailure"]["then"], "continue");
  EXPECT_EQ(plan["tasks"][0]["onFailure"]["tasks"][1]["name"], "note");
  EXPECT_EQ(plan["onFailure"][0]["name"], "page");
  EXPECT_EQ(plan["finally"].size(), 2u);
  const std::string text = PlanText(plan);
  EXPECT_THAT(text,
              HasSubstr("- fetch (runnable); on failure runs cached, then note, then goes on\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "- flaky (runnable): needs fetch (all_success); optional: its failure is a warning\n"));
  EXPECT_THAT(
      text,
      HasSubstr("- report (runnable): needs flaky (all_success); its failure fails the job\n"));
  EXPECT_THAT(text,
              HasSubstr("if the job fails: page\nfinally, however it ends: tidy, then unlock\n"));
  EXPECT_THAT(PlanDot(plan), HasSubstr("\"finally/tidy\" -> \"finally/unlock\";"));
}

}  // namespace
}  // namespace baton
