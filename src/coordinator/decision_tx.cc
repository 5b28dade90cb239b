#include "coordinator/decision_tx.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace baton {
namespace {

void CopyJobState(const JobRecord& from, JobRecord& to) {
  to.state = from.state;
  to.started_at = from.started_at;
  to.completed_at = from.completed_at;
  to.failed_at = from.failed_at;
  to.delete_at = from.delete_at;
  to.position = from.position;
  to.progress = from.progress;
  to.result = from.result;
  to.error = from.error;
}

// The scope over today's Datastore: buffered writes, stored by Flush.
class BufferedTx : public DecisionTx {
 public:
  explicit BufferedTx(Datastore& datastore) : datastore_(datastore) {}

  Result<JobRecord> GetJob(std::string_view id) override {
    if (auto it = jobs_.find(std::string(id)); it != jobs_.end()) return it->second.row;
    return datastore_.GetJob(id);
  }
  Result<TaskRecord> GetTask(std::string_view id) override {
    if (auto it = tasks_.find(std::string(id)); it != tasks_.end()) return it->second.row;
    return datastore_.GetTask(id);
  }
  Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) override {
    auto rows = Stored(job_id, [&] { return datastore_.JobTasks(job_id); });
    if (!rows.ok()) return rows;
    Overlay(*rows, [&](const TaskRecord& t) { return t.job_id == job_id; });
    std::stable_sort(rows->begin(), rows->end(), [](const TaskRecord& a, const TaskRecord& b) {
      if (a.position != b.position) return a.position < b.position;
      if (a.created_at != b.created_at) return a.created_at < b.created_at;
      return a.id < b.id;
    });
    return rows;
  }
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) override {
    auto rows = Stored(parent_id, [&] { return datastore_.ChildTasks(parent_id); });
    if (!rows.ok()) return rows;
    Overlay(*rows, [&](const TaskRecord& t) { return t.parent_id == parent_id; });
    std::stable_sort(rows->begin(), rows->end(), [](const TaskRecord& a, const TaskRecord& b) {
      if (a.created_at != b.created_at) return a.created_at < b.created_at;
      return a.id < b.id;
    });
    return rows;
  }

  Status CreateJob(const JobRecord& job) override {
    if (jobs_.contains(job.id)) return AlreadyExists("job " + job.id + " exists");
    jobs_.emplace(job.id, PendingJob{job, Write::kCreate});
    job_order_.push_back(job.id);
    return Status::Ok();
  }
  Status UpdateJob(const JobRecord& job) override { return PutJob(job, Write::kUpdate); }
  Status UpdateJobState(const JobRecord& job) override { return PutJob(job, Write::kState); }
  Status CreateTasks(const std::vector<TaskRecord>& tasks) override {
    for (const TaskRecord& t : tasks) {
      if (tasks_.contains(t.id)) return AlreadyExists("task " + t.id + " exists");
      tasks_.emplace(t.id, PendingTask{t, true});
      task_order_.push_back(t.id);
    }
    return Status::Ok();
  }
  Status UpdateTask(const TaskRecord& task) override {
    if (auto it = tasks_.find(task.id); it != tasks_.end()) {
      it->second.row = task;
      return Status::Ok();
    }
    tasks_.emplace(task.id, PendingTask{task, false});
    task_order_.push_back(task.id);
    return Status::Ok();
  }
  Result<std::vector<CancelledTask>> CancelActive(std::string_view job_id, std::string_view under,
                                                  TimePoint at) override {
    // The cancel reads the rows as stored: what is buffered goes first.
    BATON_RETURN_IF_ERROR(Flush());
    return datastore_.CancelTasks(job_id, under, at);
  }

  // Stores what is buffered and forgets it.
  Status Flush() {
    Status s = Store();
    jobs_.clear();
    tasks_.clear();
    job_order_.clear();
    task_order_.clear();
    return s;
  }

 private:
  enum class Write { kCreate, kUpdate, kState };
  struct PendingJob {
    JobRecord row;
    Write write;
  };
  struct PendingTask {
    TaskRecord row;
    bool create;
  };

  Status PutJob(const JobRecord& job, Write write) {
    auto it = jobs_.find(job.id);
    if (it == jobs_.end()) {
      jobs_.emplace(job.id, PendingJob{job, write});
      job_order_.push_back(job.id);
      return Status::Ok();
    }
    it->second.row = job;
    // A create stays one; a whole-row update is not narrowed by a later state one.
    if (it->second.write == Write::kState) it->second.write = write;
    return Status::Ok();
  }

  // The stored rows of a list (none for a job or row created in this scope).
  template <typename F>
  Result<std::vector<TaskRecord>> Stored(std::string_view id, F read) {
    auto job = jobs_.find(std::string(id));
    if (job != jobs_.end() && job->second.write == Write::kCreate) {
      return std::vector<TaskRecord>{};
    }
    auto task = tasks_.find(std::string(id));
    if (task != tasks_.end() && task->second.create) return std::vector<TaskRecord>{};
    return read();
  }
  template <typename P>
  void Overlay(std::vector<TaskRecord>& rows, P belongs) {
    for (TaskRecord& row : rows) {
      if (auto it = tasks_.find(row.id); it != tasks_.end()) row = it->second.row;
    }
    for (const std::string& id : task_order_) {
      const PendingTask& t = tasks_.at(id);
      if (t.create && belongs(t.row)) rows.push_back(t.row);
    }
  }

  Status StoreJob(const PendingJob& job) {
    switch (job.write) {
      case Write::kCreate:
        return datastore_.CreateJob(job.row);
      case Write::kUpdate:
        return datastore_.UpdateJob(job.row.id, [&](JobRecord& j) {
          j = job.row;
          return Status::Ok();
        });
      case Write::kState:
        return datastore_.UpdateJobState(job.row.id, [&](JobRecord& j) {
          CopyJobState(job.row, j);
          return Status::Ok();
        });
    }
    return Internal("unknown write");
  }

  Status Store() {
    std::vector<std::string> done;  // tasks stored with their job
    // New jobs first (tasks reference their job), each with its new tasks in one write.
    for (const std::string& id : job_order_) {
      const PendingJob& job = jobs_.at(id);
      if (job.write != Write::kCreate) continue;
      std::vector<TaskRecord> with;
      for (const std::string& t : task_order_) {
        const PendingTask& task = tasks_.at(t);
        if (task.create && task.row.job_id == id) {
          with.push_back(task.row);
          done.push_back(t);
        }
      }
      BATON_RETURN_IF_ERROR(with.empty() ? datastore_.CreateJob(job.row)
                                         : datastore_.CreateJobWithTasks(job.row, with));
    }
    std::vector<TaskRecord> created;
    std::vector<const TaskRecord*> updated;
    for (const std::string& t : task_order_) {
      if (std::find(done.begin(), done.end(), t) != done.end()) continue;
      const PendingTask& task = tasks_.at(t);
      if (task.create) {
        created.push_back(task.row);
      } else {
        updated.push_back(&task.row);
      }
    }
    if (!created.empty()) BATON_RETURN_IF_ERROR(datastore_.CreateTasks(created));
    // One updated task with its job's update: one write (an outcome that moves its job).
    std::optional<std::string> paired;
    if (!updated.empty()) {
      const TaskRecord& first = *updated.front();
      auto job = jobs_.find(first.job_id);
      if (job != jobs_.end() && job->second.write != Write::kCreate) {
        paired = first.job_id;
        const PendingJob& pending = job->second;
        BATON_RETURN_IF_ERROR(datastore_.UpdateTaskAndJob(
            first.id,
            [&](TaskRecord& t, bool& update_job) {
              t = first;
              update_job = true;
              return Status::Ok();
            },
            [&](JobRecord& j) {
              if (pending.write == Write::kUpdate) {
                j = pending.row;
              } else {
                CopyJobState(pending.row, j);
              }
              return Status::Ok();
            }));
        updated.erase(updated.begin());
      }
    }
    for (const TaskRecord* row : updated) {
      BATON_RETURN_IF_ERROR(datastore_.UpdateTask(row->id, [&](TaskRecord& t) {
        t = *row;
        return Status::Ok();
      }));
    }
    for (const std::string& id : job_order_) {
      const PendingJob& job = jobs_.at(id);
      if (job.write == Write::kCreate || (paired && *paired == id)) continue;
      BATON_RETURN_IF_ERROR(StoreJob(job));
    }
    return Status::Ok();
  }

  Datastore& datastore_;
  std::map<std::string, PendingJob> jobs_;
  std::map<std::string, PendingTask> tasks_;
  std::vector<std::string> job_order_;
  std::vector<std::string> task_order_;
};

}  // namespace

Status RunDecision(Datastore& datastore, const std::function<Status(DecisionTx&)>& body) {
  BufferedTx tx(datastore);
  BATON_RETURN_IF_ERROR(body(tx));
  return tx.Flush();
}

}  // namespace baton
