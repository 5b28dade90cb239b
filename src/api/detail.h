// Helpers of the API's handlers, shared by the files that define them (api.cc and one
// file per resource). Not part of the API's interface.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/api.h"
#include "base/status.h"
#include "core/document.h"
#include "core/records.h"

namespace baton::api::detail {

// A JSON answer with `status`; Ok is 200.
Response Json(int status, const nlohmann::json& body);
Response Ok(const nlohmann::json& body);
// The non-empty parts of `path` between `sep`s.
std::vector<std::string> Split(std::string_view path, char sep = '/');
// A page of items in Tork's shape, each item as `item` makes it.
template <typename T, typename F>
nlohmann::json PageJson(const Page<T>& page, F&& item) {
  nlohmann::json items = nlohmann::json::array();
  for (const T& t : page.items) items.push_back(item(t));
  return {{"items", std::move(items)},
          {"number", page.number},
          // The items in this page, as Tork's pages say (the last may hold fewer).
          {"size", page.items.size()},
          {"totalPages", page.total_pages},
          {"totalItems", page.total_items}};
}
// A log part, its contents with `secrets` hidden.
nlohmann::json LogPartJson(const LogPart& part, const std::vector<std::string>& secrets);
// Every error answer's body: `{"message": ..., "code": ...}` and `extra`'s fields. Use
// ErrorResponse (api.h), whose status comes from the code; this is for the codes that are
// no Status code (base/status.h's set is closed): 401 UNAUTHENTICATED, 403 PERMISSION_DENIED.
Response Error(int http_status, std::string_view code, std::string_view message,
               const nlohmann::json& extra = nlohmann::json::object());
// 403 PERMISSION_DENIED: the caller is known and may not do this.
Response PermissionDenied(std::string_view message);
// 32 lowercase hex characters.
bool IsId(std::string_view id);
// A positive integer query parameter within [lo, hi]; absent gives `fallback`.
Result<int> IntParam(const Request& request, const std::string& name, int fallback, int lo, int hi);
// A list's page: `page` (from 1, default 1) and `size` (1 to 100, default `size`).
struct Paging {
  int page = 1;
  int size = 10;
};
Result<Paging> PagingOf(const Request& request, int size);
// A boolean query parameter: "true" or "false" (also "1", "0"); absent gives `fallback`;
// anything else is InvalidArgument naming it.
Result<bool> BoolParam(const Request& request, const std::string& name, bool fallback);
// The media type of a Content-Type header, lower case, without parameters.
std::string MediaType(std::string_view content_type);
// The format of a submitted document (JSON, YAML, or sniffed without a Content-Type), or
// the answer refusing it: 413 over `max_body_bytes` (the message says "`what` is N
// bytes"), 415 for another content type.
std::variant<DocumentFormat, Response> BodyFormat(const Request& request,
                                                  std::size_t max_body_bytes,
                                                  std::string_view what);
// 400 listing every problem of a document (`errors`: line, column, path, message); 413
// when it was too large to build, naming api.max_document_bytes when that was the limit.
Response DocumentProblems(const std::vector<Diagnostic>& problems, std::string message,
                          bool too_large, std::size_t max_document_bytes);

}  // namespace baton::api::detail
