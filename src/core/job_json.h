// The API's JSON shape of a job definition (camelCase, empty fields left out). The output
// parses back with ParseJob(..., DocumentFormat::kJson) into an equal Job, and one the
// engine gave a `schedule` with DecodeJobJson(..., DecodeMode::kStored).
#pragma once

#include <nlohmann/json.hpp>

#include "core/job.h"

namespace baton {

nlohmann::json ToJson(const Job& job);
nlohmann::json ToJson(const Task& task);
nlohmann::json ToJson(const AuxTask& aux);

}  // namespace baton
