// Users, API keys and who may see a job: the records the datastore keeps and the rules
// the API applies (docs/auth.md). Plain values and pure functions, no I/O: hashing and
// the reading of credentials live in src/auth/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "core/job.h"

namespace baton {

// The role that sees and manages everything: every job, every user's keys, POST /users.
inline constexpr std::string_view kAdminRole = "admin";

// A user (Tork's `POST /users`). `password_hash` is a bcrypt hash ($2b$...); the
// password itself is never kept.
struct UserRecord {
  std::string id;
  std::string username;
  std::string name;
  std::string password_hash;
  std::vector<std::string> roles;  // e.g. {"admin"}, {"ops", "dev"}
  TimePoint created_at{};
  friend bool operator==(const UserRecord&, const UserRecord&) = default;
};

// An API key: sent as `Authorization: Bearer KEY`, it acts as its user. Only the SHA-256
// of the key is kept (`key_hash`, lowercase hex); the key is shown once, at creation.
struct ApiKeyRecord {
  std::string id;
  std::string username;
  std::string name;
  std::string key_hash;
  TimePoint created_at{};
  std::optional<TimePoint> revoked_at;  // set: the key no longer authenticates
  friend bool operator==(const ApiKeyRecord&, const ApiKeyRecord&) = default;
};

// Who is calling: an authenticated user with their roles.
struct Principal {
  std::string username;
  std::vector<std::string> roles;
  bool admin() const;
};

// A username or role name: 1 to 64 of A-Z a-z 0-9 . _ @ -, so that it can be matched as
// text in the datastore (AccessText) and never needs escaping. `what` names the field in
// the error ("username", "permissions[0].role").
Status ValidateName(std::string_view what, std::string_view name);

// Whether `who` may read and manage a job of definition `job` (its list entry, the job,
// its log, tasks, cancel, restart, delete, webhooks): an admin always; anyone when the
// job has no permissions (as Tork); otherwise its creator (beyond Tork), a user it names
// (`{user: ann}`), or a member of a role it names (`{role: ops}`).
bool MayAccess(const Principal& who, const Job& job);

// The job's permissions as the datastore keeps them beside the job, for ListJobs to
// filter in its query: "" when it has none, else "|u:ann|r:ops|" (each entry once).
std::string AccessText(const Job& job);

// What AccessText contains when a job names `who` directly or through one of their roles:
// "|u:<username>|" and "|r:<role>|" for each role.
std::vector<std::string> AccessTerms(const Principal& who);

}  // namespace baton
