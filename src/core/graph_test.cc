#include "core/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace baton {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Task Named(std::string name, std::vector<std::string> needs = {}) {
  Task t;
  t.name = std::move(name);
  t.run = "true";
  for (std::string& n : needs) t.needs.push_back({std::move(n), ""});
  return t;
}

TEST(GraphTest, ASequenceWithoutGraphFieldsIsNoGraph) {
  EXPECT_FALSE(IsGraph(TaskOrder::kSequence, {Named("a"), Named("b")}));
  EXPECT_TRUE(IsGraph(TaskOrder::kDag, {Named("a"), Named("b")}));
  EXPECT_TRUE(IsGraph(TaskOrder::kSequence, {Named("a"), Named("b", {"a"})}));
  Task ruled = Named("b");
  ruled.trigger_rule = TriggerRule::kAllDone;
  EXPECT_TRUE(IsGraph(TaskOrder::kSequence, {Named("a"), ruled}));
}

TEST(GraphTest, InASequenceATaskWithoutNeedsNeedsTheOneBeforeIt) {
  TaskGraph g = GraphOf(TaskOrder::kSequence, {Named("a"), Named("b"), Named("c", {"a"})});
  EXPECT_THAT(g.needs[0], IsEmpty());
  EXPECT_THAT(g.needs[1], ElementsAre(0));
  EXPECT_THAT(g.needs[2], ElementsAre(0));
}

TEST(GraphTest, InADagATaskWithoutNeedsIsARoot) {
  TaskGraph g = GraphOf(TaskOrder::kDag, {Named("a"), Named("b"), Named("c", {"a", "b", "a"})});
  EXPECT_THAT(g.needs[0], IsEmpty());
  EXPECT_THAT(g.needs[1], IsEmpty());
  EXPECT_THAT(g.needs[2], ElementsAre(0, 1));  // a named twice is needed once
  EXPECT_EQ(g.rules[2], TriggerRule::kAllSuccess);
}

TEST(GraphTest, FindsACycleAndNamesItsTasks) {
  EXPECT_FALSE(FindCycle(GraphOf(TaskOrder::kDag, {Named("a"), Named("b", {"a"})})));
  auto cycle = FindCycle(
      GraphOf(TaskOrder::kDag, {Named("a", {"c"}), Named("b", {"a"}), Named("c", {"b"})}));
  ASSERT_TRUE(cycle);
  EXPECT_THAT(*cycle, ElementsAre(0, 2, 1, 0));
  auto self = FindCycle(GraphOf(TaskOrder::kDag, {Named("a", {"a"})}));
  ASSERT_TRUE(self);
  EXPECT_THAT(*self, ElementsAre(0, 0));
  // A sequence's implicit edge closes a cycle with an explicit one: b after a, a needs b.
  EXPECT_TRUE(FindCycle(GraphOf(TaskOrder::kSequence, {Named("a", {"b"}), Named("b")})));
}

TEST(GraphTest, FindsNoCycleInALongChainWithoutExhaustingTheStack) {
  std::vector<Task> tasks;
  for (int i = 0; i < 20000; ++i) tasks.push_back(Named("t" + std::to_string(i)));
  EXPECT_FALSE(FindCycle(GraphOf(TaskOrder::kSequence, tasks)));
}

// Each rule over upstream states: c completed, p passed (its own if), s skipped, f failed,
// x cancelled, r running, . waiting.
struct Case {
  TriggerRule rule;
  std::vector<char> upstream;
  Verdict verdict;
};

TEST(GraphTest, EachTriggerRuleJudgesAsAirflowDoes) {
  using V = Verdict;
  using R = TriggerRule;
  const std::vector<Case> cases = {
      {R::kAllSuccess, {}, V::kRun},
      {R::kAllSuccess, {'c', 'p'}, V::kRun},
      {R::kAllSuccess, {'c', 'r'}, V::kWait},
      {R::kAllSuccess, {'f', 'r'}, V::kSkip},
      {R::kAllSuccess, {'s', 'c'}, V::kSkip},
      {R::kAllSuccess, {'x', 'c'}, V::kSkip},
      {R::kAllDone, {'c', 'f'}, V::kRun},
      {R::kAllDone, {'s', 'x'}, V::kRun},
      {R::kAllDone, {'c', '.'}, V::kWait},
      {R::kAllFailed, {'f', 'x'}, V::kRun},
      {R::kAllFailed, {'f', 'r'}, V::kWait},
      {R::kAllFailed, {'f', 'c'}, V::kSkip},
      {R::kAllFailed, {'f', 's'}, V::kSkip},
      {R::kOneSuccess, {'c', 'r'}, V::kRun},
      {R::kOneSuccess, {'p', 'f'}, V::kRun},
      {R::kOneSuccess, {'f', 'r'}, V::kWait},
      {R::kOneSuccess, {'f', 's'}, V::kSkip},
      {R::kOneFailed, {'f', 'r'}, V::kRun},
      {R::kOneFailed, {'c', 'r'}, V::kWait},
      {R::kOneFailed, {'c', 's'}, V::kSkip},
      {R::kNoneFailed, {'c', 's'}, V::kRun},
      {R::kNoneFailed, {'s', 's'}, V::kRun},
      {R::kNoneFailed, {'c', 'r'}, V::kWait},
      {R::kNoneFailed, {'f', 'r'}, V::kSkip},
      {R::kNoneFailedMinOneSuccess, {'c', 's'}, V::kRun},
      {R::kNoneFailedMinOneSuccess, {'s', 's'}, V::kSkip},
      {R::kNoneFailedMinOneSuccess, {'c', 'r'}, V::kWait},
      {R::kNoneFailedMinOneSuccess, {'x', 'r'}, V::kSkip},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Judge(c.rule, c.upstream), c.verdict)
        << ToString(c.rule) << " over " << std::string(c.upstream.begin(), c.upstream.end());
  }
}

TEST(GraphTest, RuleNamesRoundTrip) {
  for (TriggerRule r : {TriggerRule::kAllSuccess, TriggerRule::kAllDone, TriggerRule::kAllFailed,
                        TriggerRule::kOneSuccess, TriggerRule::kOneFailed, TriggerRule::kNoneFailed,
                        TriggerRule::kNoneFailedMinOneSuccess}) {
    EXPECT_EQ(ParseTriggerRule(ToString(r)), r);
  }
  EXPECT_FALSE(ParseTriggerRule("all_successful"));
}

}  // namespace
}  // namespace baton
