// DatastoreWrapper: a Datastore that forwards every call to another one. Subclass it and
// override only the calls to change (a test that fails one write, counts reads, or holds
// a call back); everything else behaves as the wrapped datastore does.
//
// Thread-safety: as the wrapped datastore (the wrapper itself keeps no state).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datastore/datastore.h"

namespace baton {

class DatastoreWrapper : public Datastore {
 public:
  // Forwards to `base`, which must outlive the wrapper.
  explicit DatastoreWrapper(Datastore& base) : base_(&base) {}
  // Forwards to `owned`, which the wrapper keeps.
  explicit DatastoreWrapper(std::unique_ptr<Datastore> owned)
      : owned_(std::move(owned)), base_(owned_.get()) {}

  Datastore& base() { return *base_; }

  Status Transact(const std::function<Status(Transaction&)>& body) override {
    return base_->Transact(body);
  }
  Status CreateJob(const JobRecord& job) override { return base_->CreateJob(job); }
  Result<JobRecord> GetJob(std::string_view id) override { return base_->GetJob(id); }
  Status UpdateJob(std::string_view id, const std::function<Status(JobRecord&)>& modify) override {
    return base_->UpdateJob(id, modify);
  }
  Status UpdateJobState(std::string_view id,
                        const std::function<Status(JobRecord&)>& modify) override {
    return base_->UpdateJobState(id, modify);
  }
  Result<Page<JobRecord>> ListJobs(const JobQuery& query) override {
    return base_->ListJobs(query);
  }
  Result<std::vector<JobRecord>> JobsInState(const std::vector<JobState>& states) override {
    return base_->JobsInState(states);
  }
  Status DeleteJob(std::string_view id) override { return base_->DeleteJob(id); }
  Result<std::vector<std::string>> JobsDueForDeletion(TimePoint now, int limit) override {
    return base_->JobsDueForDeletion(now, limit);
  }

  Status CreateTask(const TaskRecord& task) override { return base_->CreateTask(task); }
  Status CreateTasks(const std::vector<TaskRecord>& tasks) override {
    return base_->CreateTasks(tasks);
  }
  Result<TaskRecord> GetTask(std::string_view id) override { return base_->GetTask(id); }
  Status UpdateTask(std::string_view id,
                    const std::function<Status(TaskRecord&)>& modify) override {
    return base_->UpdateTask(id, modify);
  }
  Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) override {
    return base_->JobTasks(job_id);
  }
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) override {
    return base_->ChildTasks(parent_id);
  }
  Result<std::vector<TaskRecord>> TasksInState(const std::vector<TaskState>& states) override {
    return base_->TasksInState(states);
  }
  Result<std::vector<std::string>> DroppedTasks(TimePoint since, int limit) override {
    return base_->DroppedTasks(since, limit);
  }
  Result<std::vector<std::string>> WithdrawnTasks(int limit) override {
    return base_->WithdrawnTasks(limit);
  }
  Status MarkScheduled(const std::vector<std::string>& ids, TimePoint at) override {
    return base_->MarkScheduled(ids, at);
  }
  Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id, std::string_view under,
                                                 TimePoint at) override {
    return base_->CancelTasks(job_id, under, at);
  }

  Status CreateLogPart(const LogPart& part) override { return base_->CreateLogPart(part); }
  Result<Page<LogPart>> TaskLogParts(std::string_view task_id, int page, int size) override {
    return base_->TaskLogParts(task_id, page, size);
  }
  Result<Page<LogPart>> JobLogParts(std::string_view job_id, int page, int size) override {
    return base_->JobLogParts(job_id, page, size);
  }

  Status UpsertNode(const NodeRecord& node) override { return base_->UpsertNode(node); }
  Result<std::vector<NodeRecord>> ActiveNodes(TimePoint since) override {
    return base_->ActiveNodes(since);
  }

  Result<UserRecord> GetUser(std::string_view username) override {
    return base_->GetUser(username);
  }
  Result<ApiKeyRecord> GetApiKeyByHash(std::string_view key_hash) override {
    return base_->GetApiKeyByHash(key_hash);
  }
  Result<std::vector<ApiKeyRecord>> ApiKeys(std::string_view username) override {
    return base_->ApiKeys(username);
  }

  Result<StateCounts> CountStates() override { return base_->CountStates(); }
  Result<EndedCounts> CountJobsEndedSince(TimePoint since) override {
    return base_->CountJobsEndedSince(since);
  }
  Result<RunningCounts> CountRunning() override { return base_->CountRunning(); }
  Status Health() override { return base_->Health(); }
  std::size_t MaxJobBytes() const override { return base_->MaxJobBytes(); }

 private:
  std::unique_ptr<Datastore> owned_;  // null when wrapping a reference
  Datastore* base_;
};

}  // namespace baton
