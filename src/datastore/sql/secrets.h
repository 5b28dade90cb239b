// Secrets at rest: which stored values are secret, and the one pair of functions that
// encrypts them on the way into a row and decrypts them on the way out. Every place a job
// or task definition, a job's context or a webhook delivery is written to or read from
// the SQL datastore goes through these (rows.h, transaction.cc), so SQLite and PostgreSQL,
// and any new table that stores a definition (EncodeJob / DecodeStoredJob), get the same.
//
// The secret values are:
// - a job's and a sub-job's `secrets` (values), and each webhook's `secret`;
// - in every task (at any depth, and its pre/post steps and sidecars): every env value
//   (env is how secrets reach a task, `DB: "{{ secrets.db }}"`, whatever the key's name)
//   and registry passwords;
// - the members of a context's top-level `secrets`;
// - a webhook delivery's `secret` and its header values (an Authorization header is
//   usually a credential).
// Only these values are encrypted, each on its own (keyring.h's envelope), not the
// documents around them: a row stays JSON that the rest of the datastore reads as before,
// and reading one costs one AES-GCM open per secret value, not per byte of the row.
// Empty values stay empty.
//
// With no keyring (`keys` null), values are written as they are; an encrypted value read
// without a keyring is an error naming the configuration keys, never a garbled value.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "core/job.h"
#include "core/records.h"
#include "crypto/keyring.h"

namespace baton::sql {

// What a read found besides the plain values: secrets not under the primary key (stored
// in plain, or under an older key), which `baton secrets rotate` re-encrypts.
struct SecretsSeen {
  int stale = 0;
};

// Encrypts every secret value of `job` / `task` in place.
Status EncryptSecrets(Job& job, const crypto::Keyring& keys);
Status EncryptSecrets(Task& task, const crypto::Keyring& keys);
// Decrypts them in place (values that are not envelopes are kept, and counted as stale).
Status DecryptSecrets(Job& job, const crypto::Keyring* keys, SecretsSeen* seen = nullptr);
Status DecryptSecrets(Task& task, const crypto::Keyring* keys, SecretsSeen* seen = nullptr);
// True when `job` / `task` has a non-empty secret value (which EncryptSecrets would change).
bool HasSecrets(const Job& job);
bool HasSecrets(const Task& task);

// One value.
Result<std::string> EncryptValue(std::string_view plain, const crypto::Keyring* keys);
Status DecryptValue(std::string& value, const crypto::Keyring* keys, SecretsSeen* seen = nullptr);

// The stored JSON text of a context: `context` with its top-level `secrets` members
// encrypted (the rest is dumped as it is, without copying the context).
// kInvalidArgument for text that is not UTF-8.
Result<std::string> EncodeContext(const nlohmann::json& context, const crypto::Keyring* keys);
// Decrypts a parsed stored context's `secrets` in place.
Status DecryptContext(nlohmann::json& context, const crypto::Keyring* keys,
                      SecretsSeen* seen = nullptr);

// A delivery's secret and header values.
Status EncryptSecrets(WebhookDelivery& delivery, const crypto::Keyring* keys);
Status DecryptSecrets(WebhookDelivery& delivery, const crypto::Keyring* keys,
                      SecretsSeen* seen = nullptr);

}  // namespace baton::sql
