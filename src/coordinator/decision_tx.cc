#include "coordinator/decision_tx.h"

namespace baton {
namespace {

// The scope over the datastore's transaction: every call goes straight to it.
class TransactionTx final : public DecisionTx {
 public:
  explicit TransactionTx(Transaction& tx) : tx_(tx) {}

  Result<JobRecord> GetJob(std::string_view id) override { return tx_.GetJob(id); }
  Result<TaskRecord> GetTask(std::string_view id) override { return tx_.GetTask(id); }
  Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) override {
    return tx_.JobTasks(job_id);
  }
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) override {
    return tx_.ChildTasks(parent_id);
  }

  Status CreateJob(const JobRecord& job) override { return tx_.CreateJob(job); }
  Status UpdateJob(const JobRecord& job) override { return tx_.UpdateJob(job); }
  Status UpdateJobState(const JobRecord& job) override { return tx_.UpdateJobState(job); }
  Status CreateTasks(const std::vector<TaskRecord>& tasks) override {
    return tx_.CreateTasks(tasks);
  }
  Status UpdateTask(const TaskRecord& task) override { return tx_.UpdateTask(task); }
  Result<std::vector<CancelledTask>> CancelActive(std::string_view job_id, std::string_view under,
                                                  TimePoint at) override {
    return tx_.CancelTasks(job_id, under, at);
  }

 private:
  Transaction& tx_;
};

}  // namespace

Status RunDecision(Datastore& datastore, const std::function<Status(DecisionTx&)>& body) {
  return datastore.Transact([&](Transaction& tx) {
    TransactionTx scope(tx);
    return body(scope);
  });
}

}  // namespace baton
