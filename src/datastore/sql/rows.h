// Row mapping, written once for every SQL backend: JobRecord, TaskRecord, LogPart and
// NodeRecord to and from the columns of the statements in statements.h.
//
// A backend supplies two small adapters:
// - a Row (one result row): Text(col) -> string_view (valid while the row is),
//   Int(col), Int32(col), Real(col), Time(col), OptTime(col), with columns from 0;
// - a Sink (a statement's parameters, bound in order from $1): Text(string_view),
//   Int(int64), Real(double), Time(TimePoint), Time(optional<TimePoint>).
// Templates, not virtual calls: a row is read column by column in the hot paths.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstddef>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"
#include "core/auth.h"
#include "core/job_decode.h"
#include "core/records.h"
#include "core/states.h"
#include "crypto/keyring.h"
#include "datastore/adapter_util.h"
#include "datastore/sql/secrets.h"

namespace baton::sql {

// ---- Encoding -----------------------------------------------------------------------

// kInternal naming the row and what is wrong with it.
Status Corrupt(std::string_view table, std::string_view id, std::string_view problem);

// JSON text of a value; kInvalidArgument for one that cannot be stored (text that is
// not UTF-8).
Result<std::string> Dump(const nlohmann::json& value, std::string_view what);

// The one pair through which a definition is stored and read back (any table that
// stores one uses them): the JSON text with its secret values encrypted under `keys`
// (secrets.h; plain when `keys` is null), and the definition of such a text, decrypted.
Result<std::string> EncodeJob(const Job& job, const crypto::Keyring* keys);
Result<std::string> EncodeTask(const Task& task, const crypto::Keyring* keys);
Result<Job> DecodeStoredJob(std::string_view text, const crypto::Keyring* keys);
Result<Task> DecodeStoredTask(std::string_view text, const crypto::Keyring* keys);
// A stored context's text, parsed and its secrets decrypted (EncodeContext writes it).
Result<nlohmann::json> DecodeStoredContext(std::string_view text, const crypto::Keyring* keys);

// What a jobs row stores besides the record's plain fields.
struct JobText {
  std::string definition;
  std::string tags;
  std::string context;
  std::size_t bytes() const { return definition.size() + tags.size() + context.size(); }
};

// `definition`, when given, is the stored text of an unchanged definition (not encoded
// again).
Result<JobText> EncodeJobText(const JobRecord& job, std::optional<std::string> definition,
                              const crypto::Keyring* keys);

// The columns of a jobs row, in BATON_SQL_JOB_COLUMNS order ($1 .. $21).
// tasks.reason: why a failed runnable row failed, "exit:CODE" for an exit; "" for none.
inline std::string ReasonText(const TaskRecord& task) {
  if (task.reason == FailReason::kExit && task.exit_code) {
    return fmt::format("exit:{}", *task.exit_code);
  }
  return std::string(ToString(task.reason));
}
inline Status ReadReason(TaskRecord& task, std::string_view text) {
  task.reason = FailReason::kNone;
  task.exit_code.reset();
  if (text.empty()) return Status::Ok();
  std::string_view name = text.substr(0, text.find(':'));
  auto reason = ParseFailReason(name);
  if (!reason) return Corrupt("tasks", task.id, fmt::format("unknown reason '{}'", text));
  task.reason = *reason;
  if (name.size() < text.size()) {
    int code = 0;
    std::string_view digits = text.substr(name.size() + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), code);
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      return Corrupt("tasks", task.id, fmt::format("unknown reason '{}'", text));
    }
    task.exit_code = code;
  }
  return Status::Ok();
}

// jobs.ending: the state a job whose cleanup runs ends in, or "".
inline std::string_view EndingText(const JobRecord& job) {
  return job.ending ? ToString(*job.ending) : std::string_view("");  // "", not NULL
}
inline Status ReadEnding(JobRecord& job, std::string_view text) {
  job.ending.reset();
  if (text.empty()) return Status::Ok();
  job.ending = ParseJobState(text);
  if (!job.ending) return Corrupt("jobs", job.id, fmt::format("unknown ending '{}'", text));
  return Status::Ok();
}

template <typename Sink>
void BindJob(Sink& p, const JobRecord& job, const JobText& text) {
  p.Text(job.id);
  p.Text(job.parent_id);
  p.Text(ToString(job.state));
  p.Text(job.job.name);
  p.Text(job.job.description);
  p.Text(text.tags);
  p.Time(job.created_at);
  p.Time(job.started_at);
  p.Time(job.completed_at);
  p.Time(job.failed_at);
  p.Time(job.delete_at);
  p.Text(text.definition);
  p.Int(job.position);
  p.Int(job.task_count);
  p.Real(job.progress);
  p.Text(job.result);
  p.Text(job.error);
  p.Text(text.context);
  p.Text(job.job.created_by);
  p.Text(AccessText(job.job));
  p.Text(job.steps);
  p.Text(EndingText(job));
}

// The parameters of update_job_state_only ($1 .. $11): the key and the state columns.
template <typename Sink>
void BindJobState(Sink& p, const JobRecord& job) {
  p.Text(job.id);
  p.Text(ToString(job.state));
  p.Time(job.started_at);
  p.Time(job.completed_at);
  p.Time(job.failed_at);
  p.Time(job.delete_at);
  p.Int(job.position);
  p.Real(job.progress);
  p.Text(job.result);
  p.Text(job.error);
  p.Text(job.steps);
  p.Text(EndingText(job));
}

// The columns of a tasks row, in BATON_SQL_TASK_COLUMNS order ($1 .. $21).
template <typename Sink>
void BindTask(Sink& p, const TaskRecord& task, std::string_view definition) {
  p.Text(task.id);
  p.Text(task.job_id);
  p.Text(task.parent_id);
  p.Int(task.position);
  p.Text(ToString(task.state));
  p.Time(task.created_at);
  p.Time(task.scheduled_at);
  p.Time(task.started_at);
  p.Time(task.completed_at);
  p.Time(task.failed_at);
  p.Text(definition);
  p.Text(task.error);
  p.Text(task.result);
  p.Text(task.node_id);
  p.Real(task.progress);
  p.Int(task.redelivered);
  p.Int(task.each_size);
  p.Int(task.each_index);
  p.Int(task.completions);
  p.Text(task.subjob_id);
  p.Text(datastore_util::ScopeText(task.scope));
  p.Text(ReasonText(task));
  p.Text(task.steps);
}

template <typename Sink>
void BindLogPart(Sink& p, const LogPart& part) {
  p.Text(part.id);
  p.Text(part.task_id);
  p.Text(part.job_id);
  p.Int(part.number);
  p.Text(part.contents);
  p.Time(part.created_at);
}

template <typename Sink>
void BindNode(Sink& p, const NodeRecord& node) {
  p.Text(node.id);
  p.Text(node.name);
  p.Text(node.hostname);
  p.Text(node.version);
  p.Text(node.queue);
  p.Time(node.started_at);
  p.Time(node.last_heartbeat_at);
  p.Real(node.cpu_percent);
  p.Int(node.task_count);
  p.Text(ToString(node.status));
  p.Int(node.memory_bytes);
}

// ---- Decoding -----------------------------------------------------------------------

// The column of the stored definition in a jobs / tasks row.
inline constexpr int kJobDefinitionColumn = 11;
inline constexpr int kTaskDefinitionColumn = 10;

// Decoded definitions of recently read rows, by row id, kept with the stored text they
// came from: a row whose text is unchanged is not decoded again. Only large definitions
// are kept (a job of hundreds of tasks, a parallel of hundreds of children), which the
// scheduler reads at every step of their job and whose decoding dominated that step;
// small ones decode faster than a look-up. Only rows still active are kept: a row read or
// written in a terminal state leaves the cache (Forget), since the scheduler reads it no
// more, and a 20,000-task job's decoded definition (tens of MB) would otherwise stay
// until 128 other large rows pushed it out, long after its job ended. Thread-safe.
template <typename T>
class DefinitionCache {
 public:
  static constexpr std::size_t kMinBytes = 4096;
  static constexpr std::size_t kMaxEntries = 128;

  std::shared_ptr<const T> Find(std::string_view id, std::string_view text) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(std::string(id));
    if (it == entries_.end() || it->second.text != text) return nullptr;
    return it->second.value;
  }
  void Put(std::string_view id, std::string_view text, std::shared_ptr<const T> value) {
    std::lock_guard lock(mu_);
    if (entries_.size() >= kMaxEntries) entries_.clear();  // bounded; refilled on demand
    entries_[std::string(id)] = Entry{std::string(text), std::move(value)};
  }
  void Forget(std::string_view id) {
    std::lock_guard lock(mu_);
    entries_.erase(std::string(id));
  }
  std::size_t size() {
    std::lock_guard lock(mu_);
    return entries_.size();
  }

 private:
  struct Entry {
    std::string text;
    std::shared_ptr<const T> value;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
};

struct DefinitionCaches {
  DefinitionCache<Job> jobs;
  DefinitionCache<Task> tasks;

  // A row just written: one that reached a terminal state leaves its cache.
  void Written(const JobRecord& job) {
    if (IsTerminal(job.state)) jobs.Forget(job.id);
  }
  void Written(const TaskRecord& task) {
    if (IsTerminal(task.state)) tasks.Forget(task.id);
  }
};

// The decoded definition, shared with the cache (when given) if it is a large one. Also
// what an update compares the modified definition against (no second copy of it). The
// row of a terminal job or task (`active` false) is taken from the cache one last time
// and leaves it.
template <typename T, typename Decode>
Result<std::shared_ptr<const T>> CachedDecode(DefinitionCache<T>* cache, std::string_view id,
                                              std::string_view text, bool active, Decode decode) {
  const bool cached = cache != nullptr && text.size() >= DefinitionCache<T>::kMinBytes;
  if (cached) {
    std::shared_ptr<const T> hit = cache->Find(id, text);
    if (!active) cache->Forget(id);
    if (hit) return hit;
  }
  Result<T> decoded = decode(text);
  if (!decoded.ok()) return decoded.status();
  auto value = std::make_shared<const T>(std::move(*decoded));
  if (cached && active) cache->Put(id, text, value);
  return value;
}

// `original`, when given, receives the definition as decoded (before any change).
template <typename Row>
Result<JobRecord> JobFromRow(const Row& s, DefinitionCaches* caches, const crypto::Keyring* keys,
                             std::shared_ptr<const Job>* original = nullptr) {
  JobRecord job;
  job.id = std::string(s.Text(0));
  job.parent_id = std::string(s.Text(1));
  std::optional<JobState> state = ParseJobState(s.Text(2));
  if (!state) return Corrupt("jobs", job.id, fmt::format("unknown state '{}'", s.Text(2)));
  job.state = *state;
  job.created_at = s.Time(6);
  job.started_at = s.OptTime(7);
  job.completed_at = s.OptTime(8);
  job.failed_at = s.OptTime(9);
  job.delete_at = s.OptTime(10);
  auto definition =
      CachedDecode<Job>(caches != nullptr ? &caches->jobs : nullptr, job.id,
                        s.Text(kJobDefinitionColumn), !IsTerminal(job.state),
                        [keys](std::string_view text) { return DecodeStoredJob(text, keys); });
  if (!definition.ok()) {
    return Corrupt("jobs", job.id, "definition: " + definition.status().message());
  }
  job.job = **definition;
  if (original != nullptr) *original = std::move(*definition);
  job.position = s.Int32(12);
  job.task_count = s.Int32(13);
  job.progress = s.Real(14);
  job.result = std::string(s.Text(15));
  job.error = std::string(s.Text(16));
  job.steps = std::string(s.Text(20));
  BATON_RETURN_IF_ERROR(ReadEnding(job, s.Text(21)));
  Result<nlohmann::json> context = DecodeStoredContext(s.Text(17), keys);
  if (!context.ok()) return Corrupt("jobs", job.id, context.status().message());
  job.context = std::move(*context);
  return job;
}

// A row of select_job_state: the job without its definition and context.
template <typename Row>
Result<JobRecord> JobStateFromRow(const Row& s) {
  JobRecord job;
  job.id = std::string(s.Text(0));
  job.parent_id = std::string(s.Text(1));
  std::optional<JobState> state = ParseJobState(s.Text(2));
  if (!state) return Corrupt("jobs", job.id, fmt::format("unknown state '{}'", s.Text(2)));
  job.state = *state;
  job.created_at = s.Time(3);
  job.started_at = s.OptTime(4);
  job.completed_at = s.OptTime(5);
  job.failed_at = s.OptTime(6);
  job.delete_at = s.OptTime(7);
  job.position = s.Int32(8);
  job.task_count = s.Int32(9);
  job.progress = s.Real(10);
  job.result = std::string(s.Text(11));
  job.error = std::string(s.Text(12));
  job.steps = std::string(s.Text(13));
  BATON_RETURN_IF_ERROR(ReadEnding(job, s.Text(14)));
  return job;
}

template <typename Row>
Result<TaskRecord> TaskFromRow(const Row& s, DefinitionCaches* caches, const crypto::Keyring* keys,
                               std::shared_ptr<const Task>* original = nullptr) {
  TaskRecord task;
  task.id = std::string(s.Text(0));
  task.job_id = std::string(s.Text(1));
  task.parent_id = std::string(s.Text(2));
  task.position = s.Int32(3);
  std::optional<TaskState> state = ParseTaskState(s.Text(4));
  if (!state) return Corrupt("tasks", task.id, fmt::format("unknown state '{}'", s.Text(4)));
  task.state = *state;
  task.created_at = s.Time(5);
  task.scheduled_at = s.OptTime(6);
  task.started_at = s.OptTime(7);
  task.completed_at = s.OptTime(8);
  task.failed_at = s.OptTime(9);
  auto definition =
      CachedDecode<Task>(caches != nullptr ? &caches->tasks : nullptr, task.id,
                         s.Text(kTaskDefinitionColumn), !IsTerminal(task.state),
                         [keys](std::string_view text) { return DecodeStoredTask(text, keys); });
  if (!definition.ok()) {
    return Corrupt("tasks", task.id, "definition: " + definition.status().message());
  }
  task.task = **definition;
  if (original != nullptr) *original = std::move(*definition);
  task.error = std::string(s.Text(11));
  task.result = std::string(s.Text(12));
  task.node_id = std::string(s.Text(13));
  task.progress = s.Real(14);
  task.redelivered = s.Int32(15);
  task.each_size = s.Int32(16);
  task.each_index = s.Int32(17);
  task.completions = s.Int32(18);
  task.subjob_id = std::string(s.Text(19));
  auto scope = datastore_util::ParseScope(s.Text(20));
  if (!scope.ok()) return Corrupt("tasks", task.id, "scope: " + scope.status().message());
  task.scope = std::move(*scope);
  BATON_RETURN_IF_ERROR(ReadReason(task, s.Text(21)));
  task.steps = s.Text(22);
  return task;
}

template <typename Row>
Result<LogPart> LogPartFromRow(const Row& s) {
  LogPart part;
  part.id = std::string(s.Text(0));
  part.task_id = std::string(s.Text(1));
  part.job_id = std::string(s.Text(2));
  part.number = s.Int32(3);
  part.contents = std::string(s.Text(4));
  part.created_at = s.Time(5);
  return part;
}

template <typename Row>
Result<NodeRecord> NodeFromRow(const Row& s) {
  NodeRecord node;
  node.id = std::string(s.Text(0));
  node.name = std::string(s.Text(1));
  node.hostname = std::string(s.Text(2));
  node.version = std::string(s.Text(3));
  node.queue = std::string(s.Text(4));
  node.started_at = s.Time(5);
  node.last_heartbeat_at = s.Time(6);
  node.cpu_percent = s.Real(7);
  node.task_count = s.Int32(8);
  std::optional<NodeStatus> status = ParseNodeStatus(s.Text(9));
  if (!status) return Corrupt("nodes", node.id, fmt::format("unknown status '{}'", s.Text(9)));
  node.status = *status;
  node.memory_bytes = s.Int(10);
  return node;
}

// A row CancelTasks read: id, state, node_id, subjob_id.
template <typename Row>
Result<CancelledTask> CancelledFromRow(const Row& s) {
  CancelledTask t;
  t.id = std::string(s.Text(0));
  std::optional<TaskState> was = ParseTaskState(s.Text(1));
  if (!was) return Corrupt("tasks", t.id, fmt::format("unknown state '{}'", s.Text(1)));
  t.was = *was;
  t.node_id = std::string(s.Text(2));
  t.subjob_id = std::string(s.Text(3));
  return t;
}

// ---- Errors of inserts --------------------------------------------------------------

// The error of inserting a row, in the words of the contract (which id is taken, which
// parent is missing); other errors as they came.
Status JobInsertError(Status status, const JobRecord& job);
Status TaskInsertError(Status status, const TaskRecord& task);
Status LogPartInsertError(Status status, const LogPart& part);

}  // namespace baton::sql
