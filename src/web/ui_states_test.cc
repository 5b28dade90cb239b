// The UI repeats the engine's state predicates (web/src/states.ts); this test reads its
// lists and compares them with core/states.h, so the two cannot drift apart.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/names.h"
#include "core/states.h"

namespace baton {
namespace {

using States = std::set<std::string>;

// Every `export const NAME... = new Set([...])` of the file, by name.
std::map<std::string, States> UiLists() {
  std::ifstream in(BATON_UI_STATES_TS);
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();
  std::map<std::string, States> lists;
  const std::regex declaration(R"re(export const (\w+)[^=]*=\s*new Set\(\[([^\]]*)\]\))re");
  const std::regex word(R"re("([A-Z_]+)")re");
  for (std::sregex_iterator d(source.begin(), source.end(), declaration), end; d != end; ++d) {
    const std::string items = (*d)[2];
    States& states = lists[(*d)[1]];
    for (std::sregex_iterator w(items.begin(), items.end(), word); w != end; ++w) {
      states.insert((*w)[1]);
    }
  }
  return lists;
}

// Every state of each machine (names_test.cc checks these round-trip).
constexpr JobState kJobStates[] = {JobState::kPending,   JobState::kScheduled, JobState::kRunning,
                                   JobState::kCompleted, JobState::kFailed,    JobState::kCancelled,
                                   JobState::kPaused};
constexpr TaskState kTaskStates[] = {
    TaskState::kCreated,   TaskState::kPending, TaskState::kScheduled, TaskState::kRunning,
    TaskState::kCompleted, TaskState::kFailed,  TaskState::kCancelled, TaskState::kSkipped};

template <typename State, std::size_t N, typename Predicate>
States Where(const State (&all)[N], Predicate predicate) {
  States out;
  for (State s : all) {
    if (predicate(s)) out.insert(std::string(ToString(s)));
  }
  return out;
}

TEST(UiStatesTest, TheUisListsAreTheEnginesPredicates) {
  std::map<std::string, States> ui = UiLists();
  ASSERT_EQ(ui.size(), 4u) << "expected four lists in " << BATON_UI_STATES_TS;
  EXPECT_EQ(ui["ACTIVE_JOB_STATES"], Where(kJobStates, [](JobState s) { return IsActive(s); }));
  EXPECT_EQ(ui["TERMINAL_JOB_STATES"], Where(kJobStates, [](JobState s) { return IsTerminal(s); }));
  EXPECT_EQ(ui["ACTIVE_TASK_STATES"], Where(kTaskStates, [](TaskState s) { return IsActive(s); }));
  EXPECT_EQ(ui["TERMINAL_TASK_STATES"],
            Where(kTaskStates, [](TaskState s) { return IsTerminal(s); }));
}

}  // namespace
}  // namespace baton
