#include "datastore/sql/secrets.h"

#include <fmt/format.h>

#include <exception>
#include <type_traits>
#include <utility>

#include "core/redact.h"
#include "core/task_kind.h"

namespace baton::sql {
namespace {

using nlohmann::json;

// Calls fn(value) on every secret value of the model, const or not; stops at the first
// error. One walk for encrypting, decrypting and finding secrets, so the three agree.
// Every env value, whatever its key: env is how a job's secrets reach its tasks
// (`DB: "{{ secrets.db }}"`, evaluated into the row), and a key need not look secret.
template <typename M, typename Fn>
Status VisitEnv(M& env, Fn& fn) {
  for (auto& [key, value] : env) BATON_RETURN_IF_ERROR(fn(value));
  return Status::Ok();
}

template <typename R, typename Fn>
Status VisitRegistry(R& registry, Fn& fn) {
  if (registry) BATON_RETURN_IF_ERROR(fn(registry->password));
  return Status::Ok();
}

template <typename W, typename Fn>
Status VisitWebhooks(W& webhooks, Fn& fn) {
  for (auto& hook : webhooks) BATON_RETURN_IF_ERROR(fn(hook.secret));
  return Status::Ok();
}

template <typename T, typename Fn>
Status VisitTask(T& task, Fn& fn) {
  BATON_RETURN_IF_ERROR(VisitEnv(task.env, fn));
  BATON_RETURN_IF_ERROR(VisitRegistry(task.registry, fn));
  for (auto* steps : {&task.pre, &task.post, &task.sidecars}) {
    for (auto& step : *steps) {
      BATON_RETURN_IF_ERROR(VisitEnv(step.env, fn));
      BATON_RETURN_IF_ERROR(VisitRegistry(step.registry, fn));
    }
  }
  Status status = Status::Ok();
  ForEachSubtask(task, [&](auto& child) {
    if (status.ok()) status = VisitTask(child, fn);
  });
  BATON_RETURN_IF_ERROR(status);
  if (task.subjob) {
    for (auto& [key, value] : task.subjob->secrets) BATON_RETURN_IF_ERROR(fn(value));
    BATON_RETURN_IF_ERROR(VisitWebhooks(task.subjob->webhooks, fn));
    ForEachJobTask(*task.subjob, [&](auto& child) {
      if (status.ok()) status = VisitTask(child, fn);
    });
    BATON_RETURN_IF_ERROR(status);
  }
  return Status::Ok();
}

template <typename J, typename Fn>
Status VisitJob(J& job, Fn& fn) {
  for (auto& [key, value] : job.secrets) BATON_RETURN_IF_ERROR(fn(value));
  BATON_RETURN_IF_ERROR(VisitWebhooks(job.webhooks, fn));
  Status status = Status::Ok();
  ForEachJobTask(job, [&](auto& task) {
    if (status.ok()) status = VisitTask(task, fn);
  });
  return status;
}

// Stops the walk at the first non-empty value.
struct Finder {
  bool found = false;
  Status operator()(const std::string& value) {
    if (value.empty()) return Status::Ok();
    found = true;
    return Cancelled("found");
  }
};

struct Encrypter {
  const crypto::Keyring& keys;
  Status operator()(std::string& value) const {
    if (value.empty()) return Status::Ok();
    BATON_ASSIGN_OR_RETURN(std::string sealed, keys.Encrypt(value));
    value = std::move(sealed);
    return Status::Ok();
  }
};

struct Decrypter {
  const crypto::Keyring* keys;
  SecretsSeen* seen;
  Status operator()(std::string& value) const { return DecryptValue(value, keys, seen); }
};

}  // namespace

Status EncryptSecrets(Job& job, const crypto::Keyring& keys) {
  Encrypter fn{keys};
  return VisitJob(job, fn);
}
Status EncryptSecrets(Task& task, const crypto::Keyring& keys) {
  Encrypter fn{keys};
  return VisitTask(task, fn);
}
Status DecryptSecrets(Job& job, const crypto::Keyring* keys, SecretsSeen* seen) {
  Decrypter fn{keys, seen};
  return VisitJob(job, fn);
}
Status DecryptSecrets(Task& task, const crypto::Keyring* keys, SecretsSeen* seen) {
  Decrypter fn{keys, seen};
  return VisitTask(task, fn);
}
bool HasSecrets(const Job& job) {
  Finder fn;
  (void)VisitJob(job, fn);
  return fn.found;
}
bool HasSecrets(const Task& task) {
  Finder fn;
  (void)VisitTask(task, fn);
  return fn.found;
}

Result<std::string> EncryptValue(std::string_view plain, const crypto::Keyring* keys) {
  if (keys == nullptr || plain.empty()) return std::string(plain);
  return keys->Encrypt(plain);
}

Status DecryptValue(std::string& value, const crypto::Keyring* keys, SecretsSeen* seen) {
  if (value.empty()) return Status::Ok();
  if (!crypto::IsEnvelope(value)) {
    if (seen != nullptr) ++seen->stale;  // stored before encryption was configured
    return Status::Ok();
  }
  if (keys == nullptr) {
    return FailedPrecondition(
        fmt::format("a secret is encrypted with key {} but no encryption key is configured "
                    "(datastore.encryption.key or datastore.encryption.key_file)",
                    crypto::EnvelopeKeyId(value)));
  }
  if (seen != nullptr && !keys->IsCurrent(value)) ++seen->stale;
  BATON_ASSIGN_OR_RETURN(std::string plain, keys->Decrypt(value));
  value = std::move(plain);
  return Status::Ok();
}

Result<std::string> EncodeContext(const json& context, const crypto::Keyring* keys) {
  try {
    auto secrets = context.is_object() ? context.find("secrets") : context.end();
    if (keys == nullptr || secrets == context.end() || !secrets->is_object() || secrets->empty()) {
      return context.dump();  // throws on strings that are not UTF-8
    }
    // The context as json::dump writes it (members in key order), with the secrets'
    // values sealed: only the small `secrets` object is copied.
    json sealed = json::object();
    for (auto it = secrets->begin(); it != secrets->end(); ++it) {
      if (it->is_string()) {
        BATON_ASSIGN_OR_RETURN(std::string value,
                               EncryptValue(it->get_ref<const std::string&>(), keys));
        sealed[it.key()] = std::move(value);
      } else {
        sealed[it.key()] = *it;
      }
    }
    std::string out = "{";
    bool first = true;
    for (auto it = context.begin(); it != context.end(); ++it) {
      if (!first) out += ',';
      first = false;
      out += json(it.key()).dump();
      out += ':';
      out += it.key() == "secrets" ? sealed.dump() : it->dump();
    }
    out += '}';
    return out;
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("job context cannot be stored: {}", e.what()));
  }
}

Status DecryptContext(json& context, const crypto::Keyring* keys, SecretsSeen* seen) {
  if (!context.is_object()) return Status::Ok();
  auto secrets = context.find("secrets");
  if (secrets == context.end() || !secrets->is_object()) return Status::Ok();
  for (auto it = secrets->begin(); it != secrets->end(); ++it) {
    if (!it->is_string()) continue;
    BATON_RETURN_IF_ERROR(DecryptValue(it->get_ref<std::string&>(), keys, seen));
  }
  return Status::Ok();
}

Status EncryptSecrets(WebhookDelivery& delivery, const crypto::Keyring* keys) {
  if (keys == nullptr) return Status::Ok();
  Encrypter fn{*keys};
  BATON_RETURN_IF_ERROR(fn(delivery.secret));
  for (auto& [name, value] : delivery.headers) BATON_RETURN_IF_ERROR(fn(value));
  return Status::Ok();
}

Status DecryptSecrets(WebhookDelivery& delivery, const crypto::Keyring* keys, SecretsSeen* seen) {
  BATON_RETURN_IF_ERROR(DecryptValue(delivery.secret, keys, seen));
  for (auto& [name, value] : delivery.headers) {
    BATON_RETURN_IF_ERROR(DecryptValue(value, keys, seen));
  }
  return Status::Ok();
}

}  // namespace baton::sql
