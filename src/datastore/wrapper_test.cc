#include "datastore/wrapper.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "conformance/datastore_conformance.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/faulty_datastore.h"

namespace baton {
namespace {

using testing::DatastoreConformanceTest;
using testing::DatastoreFactory;
using testing::DatastoreFactoryName;
using testing::FaultyDatastore;
using namespace testing::datastore_conformance;

std::unique_ptr<Datastore> OpenMemory() {
  auto store = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    return nullptr;
  }
  return std::move(*store);
}

// The whole datastore contract, through the wrapper and through a fault injector with no
// fault set: every method must reach the wrapped datastore with its arguments and bring
// back its answer.
INSTANTIATE_TEST_SUITE_P(
    Wrapped, DatastoreConformanceTest,
    ::testing::Values(
        DatastoreFactory{"wrapper", [] { return std::make_unique<DatastoreWrapper>(OpenMemory()); },
                         nullptr, true},
        DatastoreFactory{"faulty_without_faults",
                         [] { return std::make_unique<FaultyDatastore>(OpenMemory()); }, nullptr, true}),
    DatastoreFactoryName);

// A test overrides the one call it cares about; the rest still reach the wrapped store.
class RenamingDatastore : public DatastoreWrapper {
 public:
  using DatastoreWrapper::DatastoreWrapper;
  Result<JobRecord> GetJob(std::string_view id) override {
    auto job = DatastoreWrapper::GetJob(id);
    if (job.ok()) job->job.name = "renamed";
    return job;
  }
};

TEST(DatastoreWrapperTest, AnOverriddenCallChangesOnlyThatCall) {
  std::unique_ptr<Datastore> base = OpenMemory();
  RenamingDatastore wrapped(*base);
  JobRecord job = NewJob(SimpleJob("original"), At(0));
  ASSERT_TRUE(wrapped.CreateJob(job).ok());
  auto read = wrapped.GetJob(job.id);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->job.name, "renamed");
  auto listed = wrapped.JobsInState({JobState::kPending});  // not overridden
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().job.name, "original");
  EXPECT_EQ(base->GetJob(job.id)->job.name, "original");  // the write reached the base
}

TEST(FaultyDatastoreTest, FailsTheNthMatchingCallWithTheGivenStatus) {
  FaultyDatastore store(OpenMemory());
  store.FailNthCall(2, Unavailable("disk gone"), FaultyDatastore::Method("CreateJob"));
  JobRecord first = NewJob(SimpleJob("a"), At(0));
  JobRecord second = NewJob(SimpleJob("b"), At(1));
  JobRecord third = NewJob(SimpleJob("c"), At(2));
  EXPECT_TRUE(store.CreateJob(first).ok());
  EXPECT_TRUE(store.GetJob(first.id).ok());  // another method: not counted by the rule
  EXPECT_EQ(store.CreateJob(second), Unavailable("disk gone"));
  EXPECT_TRUE(store.CreateJob(third).ok());  // only the 2nd fails
  EXPECT_EQ(store.base().GetJob(second.id).status().code(), StatusCode::kNotFound);  // not stored
  EXPECT_TRUE(store.base().GetJob(third.id).ok());
  EXPECT_EQ(store.calls("CreateJob"), 3);
  EXPECT_EQ(store.calls("GetJob"), 1);
}

TEST(FaultyDatastoreTest, FailsEveryCallMatchingAPredicateUntilCleared) {
  FaultyDatastore store(OpenMemory());
  JobRecord a = NewJob(SimpleJob("a"), At(0));
  JobRecord b = NewJob(SimpleJob("b"), At(1));
  store.FailCalls(FaultyDatastore::OfJob(b.id), Internal("injected"));
  EXPECT_TRUE(store.CreateJob(a).ok());
  EXPECT_EQ(store.CreateJob(b), Internal("injected"));
  EXPECT_EQ(store.CreateTask(NewTask(b.id, 1, At(2))), Internal("injected"));
  EXPECT_EQ(store.GetJob(b.id).status(), Internal("injected"));
  EXPECT_TRUE(store.CreateTask(NewTask(a.id, 1, At(3))).ok());
  store.ClearFailures();
  EXPECT_TRUE(store.CreateJob(b).ok());
}

TEST(FaultyDatastoreTest, HoldsOneJobsWriteWhileAnotherJobsWriteCompletes) {
  FaultyDatastore store(OpenMemory());
  JobRecord held_job = NewJob(SimpleJob("held"), At(0));
  JobRecord free_job = NewJob(SimpleJob("free"), At(1));
  ASSERT_TRUE(store.CreateJob(held_job).ok());
  ASSERT_TRUE(store.CreateJob(free_job).ok());
  auto set_running = [](JobRecord& j) {
    j.state = JobState::kRunning;
    return Status::Ok();
  };

  const int hold = store.Hold(FaultyDatastore::OfJob(held_job.id));
  Status held_result = Internal("not returned yet");
  std::thread writer([&] { held_result = store.UpdateJob(held_job.id, set_running); });
  ASSERT_TRUE(store.WaitUntilHeld(hold));

  // The other job's write goes through while the first one waits.
  ASSERT_TRUE(store.UpdateJob(free_job.id, set_running).ok());
  EXPECT_EQ(store.base().GetJob(free_job.id)->state, JobState::kRunning);
  EXPECT_EQ(store.base().GetJob(held_job.id)->state, JobState::kPending);  // not written yet

  store.Release(hold);
  writer.join();
  EXPECT_TRUE(held_result.ok()) << held_result.ToString();
  EXPECT_EQ(store.base().GetJob(held_job.id)->state, JobState::kRunning);
}

TEST(FaultyDatastoreTest, WaitUntilHeldTimesOutWhenNothingIsHeld) {
  FaultyDatastore store(OpenMemory());
  const int hold = store.Hold(FaultyDatastore::Method("DeleteJob"));
  EXPECT_FALSE(store.WaitUntilHeld(hold, 1, std::chrono::milliseconds(20)));
  EXPECT_TRUE(store.Health().ok());  // other calls are not held
  store.Release(hold);
}

}  // namespace
}  // namespace baton
