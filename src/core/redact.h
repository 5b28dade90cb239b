// Redaction: secrets never leave the engine. A job's secret values, and the values of
// env keys that look secret (*SECRET*, *PASSWORD*, *TOKEN*, *ACCESS_KEY*), are replaced
// by [REDACTED] wherever they appear in an API response or a stored log line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/records.h"

namespace baton {

inline constexpr std::string_view kRedacted = "[REDACTED]";

// True for env keys whose values are secret.
bool IsSecretKey(std::string_view key);

// The values to hide for a job definition (its secrets, and the secret-looking env values
// of its tasks as written), longest first.
std::vector<std::string> SecretValues(const Job& job);
// The same for a stored job, and also the secret-looking env values written as templates
// that the job's context (inputs, secrets, finished tasks' results) evaluates:
// `API_TOKEN: "{{ inputs.token }}"` hides the token, not the template text. Templates that
// need more (an each's item) or change at every evaluation (randomInt, now) are left to
// the task rows, which hold the values as evaluated: add those with AddSecretValues.
std::vector<std::string> SecretValues(const JobRecord& job);
// The same for one task row (its env, its steps' and sidecars' env and its registry
// password, as stored: evaluated once the row is scheduled), merged into `values`.
void AddSecretValues(const Task& task, std::vector<std::string>& values);
// Merges `more` into `values`, longest first, without duplicates.
void MergeSecretValues(const std::vector<std::string>& more, std::vector<std::string>& values);

// Replaces every occurrence of every value in `text`.
std::string RedactText(std::string_view text, const std::vector<std::string>& values);

// Redacts a text that comes in parts (a task's log, read as the task writes it) as if it
// came whole: a secret written in two writes, or across a read, is hidden as one. Each
// Next returns what is final: the text up to where no secret can still start (and not
// inside a UTF-8 character); the rest is held for the next part. Finish returns the rest.
class StreamRedactor {
 public:
  std::string Next(std::string_view part, const std::vector<std::string>& values);
  std::string Finish(const std::vector<std::string>& values);
  // What is held: at most the longest secret less one byte, or an unfinished character.
  const std::string& held() const { return held_; }

 private:
  std::string held_;
};

// Redacts a JSON document in place: every string (keys excepted) through RedactText;
// the members of "secrets" objects, and of "env" objects under secret-looking keys,
// become [REDACTED].
void RedactJson(nlohmann::json& json, const std::vector<std::string>& values);

}  // namespace baton
