// Redaction: secrets never leave the engine. A job's secret values, and the values of
// env keys that look secret (*SECRET*, *PASSWORD*, *TOKEN*, *ACCESS_KEY*), are replaced
// by [REDACTED] wherever they appear in an API response or a stored log line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/records.h"

namespace baton {

inline constexpr std::string_view kRedacted = "[REDACTED]";

// True for env keys whose values are secret.
bool IsSecretKey(std::string_view key);

// The values to hide for a job (its secrets, and the secret-looking env values of its
// definition's tasks), longest first.
std::vector<std::string> SecretValues(const Job& job);
// The same for one task row (its env and its steps' env), merged into `values`.
void AddSecretValues(const Task& task, std::vector<std::string>& values);

// Replaces every occurrence of every value in `text`.
std::string RedactText(std::string_view text, const std::vector<std::string>& values);

// Redacts a JSON document in place: every string (keys excepted) through RedactText;
// the members of "secrets" objects, and of "env" objects under secret-looking keys,
// become [REDACTED].
void RedactJson(nlohmann::json& json, const std::vector<std::string>& values);

}  // namespace baton
