#include "coordinator/job_cache.h"

#include <utility>

namespace baton {

Result<std::shared_ptr<const Job>> JobCache::DefinitionOf(Transaction& tx,
                                                          const std::string& job_id) {
  {
    MutexLock lock(definitions_mu_);
    if (auto it = definitions_.find(job_id); it != definitions_.end()) return it->second;
  }
  // Read outside the mutex (the tree's lock keeps other decisions of this job out); a
  // definition never changes once stored, so whichever read lands is the same.
  auto definition = tx.GetJobDefinition(job_id);
  if (!definition.ok()) return definition.status();
  MutexLock lock(definitions_mu_);
  if (definitions_.size() >= kMaxDefinitions) definitions_.clear();  // refilled on demand
  definitions_[job_id] = *definition;
  return *definition;
}

Result<std::shared_ptr<const nlohmann::json>> JobCache::ContextOf(Transaction& tx,
                                                                  const std::string& job_id,
                                                                  int version, Scope& scope) {
  if (auto it = scope.find(job_id); it != scope.end()) {
    if (it->second && it->second->version == version) return it->second->value;
  } else {
    MutexLock lock(contexts_mu_);
    if (auto kept = contexts_.find(job_id); kept != contexts_.end()) {
      if (kept->second.version == version) return kept->second.value;
    }
  }
  // Read outside the mutex (the tree's lock keeps other decisions of this job out).
  std::size_t bytes = 0;
  auto context = tx.GetJobContext(job_id, &bytes);
  if (!context.ok()) return context.status();
  auto shared = std::make_shared<const nlohmann::json>(std::move(*context));
  scope[job_id] = Context{version, shared, bytes};
  return shared;
}

void JobCache::Wrote(Scope& scope, const std::string& job_id, nlohmann::json context) {
  std::optional<Context>& kept = scope[job_id];
  if (!kept) return;
  kept->version += 1;
  kept->value = std::make_shared<const nlohmann::json>(std::move(context));
}

void JobCache::Created(Scope& scope, const JobRecord& row) {
  // Bounded by its text's length, as a read one is (dumped as EncodeContext dumps it).
  const std::size_t bytes =
      row.context.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  scope[row.id] = Context{0, std::make_shared<const nlohmann::json>(row.context), bytes};
}

void JobCache::Keep(const std::vector<JobRecord>& created) {
  if (created.empty()) return;
  MutexLock lock(definitions_mu_);
  for (const JobRecord& job : created) {
    if (definitions_.size() >= kMaxDefinitions) definitions_.clear();  // refilled on demand
    definitions_[job.id] = std::make_shared<const Job>(job.job);
  }
}

void JobCache::Publish(Scope& scope) {
  if (scope.empty()) return;
  MutexLock lock(contexts_mu_);
  for (auto& [job_id, context] : scope) {
    ForgetContextLocked(job_id);
    if (!context) continue;
    if (contexts_.size() >= kMaxContexts || context_bytes_ + context->bytes > kMaxContextBytes) {
      contexts_.clear();  // refilled on demand
      context_bytes_ = 0;
    }
    context_bytes_ += context->bytes;
    contexts_[job_id] = std::move(*context);
  }
}

void JobCache::Forget(const std::vector<JobRecord>& finished) {
  if (finished.empty()) return;
  {
    MutexLock lock(definitions_mu_);
    for (const JobRecord& job : finished) {
      auto it = definitions_.find(job.id);
      if (it == definitions_.end()) continue;
      if (it->second->webhooks.empty()) {
        if (without_hooks_.size() >= kMaxWithoutHooks) without_hooks_.clear();
        without_hooks_.insert(job.id);
      }
      definitions_.erase(it);
    }
  }
  MutexLock lock(contexts_mu_);
  for (const JobRecord& job : finished) ForgetContextLocked(job.id);
}

bool JobCache::KnownWithoutHooks(const std::string& job_id) {
  MutexLock lock(definitions_mu_);
  return without_hooks_.contains(job_id);
}

void JobCache::ForgetContextLocked(const std::string& job_id) {
  if (auto it = contexts_.find(job_id); it != contexts_.end()) {
    context_bytes_ -= it->second.bytes;
    contexts_.erase(it);
  }
}

}  // namespace baton
