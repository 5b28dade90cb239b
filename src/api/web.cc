// The web UI's files (web/assets.h), served as built.
#include <fmt/format.h>

#include "api/api.h"
#include "api/detail.h"
#include "web/assets.h"

namespace baton::api {

using nlohmann::json;
using namespace detail;

Response Api::WebFile(const std::string& path, const Request* request) {
  const web::Asset* asset = web::FindAsset(path);
  if (asset == nullptr) {
    return ErrorResponse(NotFound(web::Assets().empty()
                                      ? "this baton was built without the web UI (BATON_WEB=OFF)"
                                      : fmt::format("no such file: {}", path.substr(0, 200))));
  }
  Response r;
  const std::string etag = fmt::format("\"{}\"", asset->sha256.substr(0, 32));
  r.headers.emplace_back("ETag", etag);
  // Built files carry their content's hash in their names: cached for good. The page
  // itself is asked again each time (then answered 304 when unchanged).
  r.headers.emplace_back("Cache-Control", path.starts_with("/assets/")
                                              ? "public, max-age=31536000, immutable"
                                              : "no-cache");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (asset->content_type.starts_with("text/html")) {
    // Nothing from elsewhere: scripts, styles, images and connections stay on this server.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; script-src 'self'; style-src 'self' "
                           "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
  }
  if (request != nullptr) {
    if (auto it = request->headers.find("if-none-match");
        it != request->headers.end() && it->second == etag) {
      r.status = 304;
      return r;
    }
  }
  r.content_type = std::string(asset->content_type);
  r.body = std::string(asset->bytes);
  return r;
}

}  // namespace baton::api
