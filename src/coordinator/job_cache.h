// JobCache: running jobs' definitions and contexts, read once and shared between the
// decisions about them (a running job's definition never changes; its context changes only
// when a task with a `var` completes), so what a step reads of its job does not grow with
// the job's length. Bounded (emptied when full, refilled on demand); a job's entries are
// forgotten when it ends.
//
// Contexts go through a decision's Scope: what the scope read or wrote is published to the
// cache once its transaction commits (Publish) and dropped if it does not, since a version
// read or written in a scope that rolls back may be written again with other contents.
//
// Thread-safety: thread-safe. Two annotated mutexes guard the maps and are never held
// across a datastore call; the caller holds the job tree's lock, which keeps other
// decisions about the same job out.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "core/job.h"
#include "core/records.h"
#include "datastore/datastore.h"

namespace baton {

class JobCache {
 public:
  // A job's context at one version (Transaction::GetJobState's), parsed once.
  struct Context {
    int version = 0;
    std::shared_ptr<const nlohmann::json> value;
    std::size_t bytes = 0;  // its stored text's length, what the cache is bounded by
  };
  // The contexts one decision read or wrote: job id → the context as it is in the scope
  // (none: forget the kept one).
  using Scope = std::map<std::string, std::optional<Context>>;

  Result<std::shared_ptr<const Job>> DefinitionOf(Transaction& tx, const std::string& job_id)
      BATON_EXCLUDES(definitions_mu_);
  // The context at `version`: the scope's, the kept one, or read and parsed (then kept in
  // `scope`).
  Result<std::shared_ptr<const nlohmann::json>> ContextOf(Transaction& tx,
                                                          const std::string& job_id, int version,
                                                          Scope& scope)
      BATON_EXCLUDES(contexts_mu_);
  // The scope wrote the job's context: the version it read is raised (unknown otherwise:
  // the context is read again next time).
  static void Wrote(Scope& scope, const std::string& job_id, nlohmann::json context);
  // The scope created the job: its context is the row's, at the version a new row has (0),
  // so the first decision about it (a big each's start) does not read and parse it again.
  static void Created(Scope& scope, const JobRecord& row);
  // The jobs were stored: their definitions are kept as they were created.
  void Keep(const std::vector<JobRecord>& created) BATON_EXCLUDES(definitions_mu_);
  // The scope committed: what it read or wrote is kept.
  void Publish(Scope& scope) BATON_EXCLUDES(contexts_mu_);
  // The jobs ended: their definitions are read again if they are restarted. Those known
  // to have no webhooks are remembered as such (KnownWithoutHooks).
  void Forget(const std::vector<JobRecord>& finished) BATON_EXCLUDES(definitions_mu_, contexts_mu_);
  // The job ended and its definition has no webhooks (a definition never changes): a late
  // event about it (a killed task's outcome after a cancel) needs no hook reads, and so
  // neither reads nor parses its definition again.
  bool KnownWithoutHooks(const std::string& job_id) BATON_EXCLUDES(definitions_mu_);

 private:
  void ForgetContextLocked(const std::string& job_id) BATON_REQUIRES(contexts_mu_);

  static constexpr std::size_t kMaxDefinitions = 4096;
  static constexpr std::size_t kMaxContexts = 4096;
  static constexpr std::size_t kMaxContextBytes = 64u << 20;
  Mutex definitions_mu_;
  std::map<std::string, std::shared_ptr<const Job>> definitions_ BATON_GUARDED_BY(definitions_mu_);
  static constexpr std::size_t kMaxWithoutHooks = 65536;
  std::set<std::string> without_hooks_ BATON_GUARDED_BY(definitions_mu_);
  Mutex contexts_mu_;
  std::map<std::string, Context> contexts_ BATON_GUARDED_BY(contexts_mu_);
  std::size_t context_bytes_ BATON_GUARDED_BY(contexts_mu_) = 0;
};

}  // namespace baton
