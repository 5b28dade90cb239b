#include "datastore/sql/rows.h"

#include <exception>
#include <utility>

#include "core/job_json.h"

namespace baton::sql {

Status Corrupt(std::string_view table, std::string_view id, std::string_view problem) {
  return Internal(fmt::format("stored {} row {} is unreadable: {}", table, id, problem));
}

Result<std::string> Dump(const nlohmann::json& value, std::string_view what) {
  try {
    return value.dump();  // throws on strings that are not UTF-8
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("{} cannot be stored: {}", what, e.what()));
  }
}

Result<std::string> EncodeJob(const Job& job, const crypto::Keyring* keys) {
  try {
    if (keys == nullptr || !HasSecrets(job)) return Dump(ToJson(job), "job definition");
    Job sealed = job;
    BATON_RETURN_IF_ERROR(EncryptSecrets(sealed, *keys));
    return Dump(ToJson(sealed), "job definition");
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("job definition cannot be stored: {}", e.what()));
  }
}

Result<std::string> EncodeTask(const Task& task, const crypto::Keyring* keys) {
  try {
    if (keys == nullptr || !HasSecrets(task)) return Dump(ToJson(task), "task definition");
    Task sealed = task;
    BATON_RETURN_IF_ERROR(EncryptSecrets(sealed, *keys));
    return Dump(ToJson(sealed), "task definition");
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("task definition cannot be stored: {}", e.what()));
  }
}

Result<Job> DecodeStoredJob(std::string_view text, const crypto::Keyring* keys) {
  Result<Job> job = DecodeJobJson(text, DecodeMode::kStored);
  if (!job.ok()) return job;
  BATON_RETURN_IF_ERROR(DecryptSecrets(*job, keys));
  return job;
}

Result<Task> DecodeStoredTask(std::string_view text, const crypto::Keyring* keys) {
  Result<Task> task = DecodeTaskJson(text, DecodeMode::kStored);
  if (!task.ok()) return task;
  BATON_RETURN_IF_ERROR(DecryptSecrets(*task, keys));
  return task;
}

Result<nlohmann::json> DecodeStoredContext(std::string_view text, const crypto::Keyring* keys) {
  auto context = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (context.is_discarded()) return Internal("context is not JSON");
  Status decrypted = DecryptContext(context, keys);
  if (!decrypted.ok()) return Internal("context: " + decrypted.message());
  return context;
}

Result<JobText> EncodeJobText(const JobRecord& job, std::optional<std::string> definition,
                              const crypto::Keyring* keys) {
  JobText text;
  if (definition) {
    text.definition = std::move(*definition);
  } else {
    Result<std::string> encoded = EncodeJob(job.job, keys);
    if (!encoded.ok()) return encoded.status();
    text.definition = std::move(*encoded);
  }
  Result<std::string> tags = Dump(nlohmann::json(job.job.tags), "job tags");
  if (!tags.ok()) return tags.status();
  Result<std::string> context = EncodeContext(job.context, keys);
  if (!context.ok()) return context.status();
  text.tags = std::move(*tags);
  text.context = std::move(*context);
  return text;
}

Status JobInsertError(Status status, const JobRecord& job) {
  if (status.code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("job {} already exists", job.id));
  }
  return status;
}

Status TaskInsertError(Status status, const TaskRecord& task) {
  if (status.code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("task {} already exists", task.id));
  }
  if (status.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(fmt::format("task {}: job {} does not exist", task.id, task.job_id));
  }
  return status;
}

Status LogPartInsertError(Status status, const LogPart& part) {
  if (status.code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("log part {} already exists", part.id));
  }
  if (status.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(
        fmt::format("log part {}: task {} does not exist", part.id, part.task_id));
  }
  return status;
}

}  // namespace baton::sql
