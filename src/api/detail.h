// Helpers of the API's handlers, shared by the files that define them (api.cc,
// scheduled_jobs.cc). Not part of the API's interface.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/api.h"
#include "base/status.h"

namespace baton::api::detail {

// A JSON answer with `status`; Ok is 200.
Response Json(int status, const nlohmann::json& body);
Response Ok(const nlohmann::json& body);
// 32 lowercase hex characters.
bool IsId(std::string_view id);
// A positive integer query parameter within [lo, hi]; absent gives `fallback`.
Result<int> IntParam(const Request& request, const std::string& name, int fallback, int lo, int hi);
// The media type of a Content-Type header, lower case, without parameters.
std::string MediaType(std::string_view content_type);

}  // namespace baton::api::detail
