// DockerClient: HTTP requests to the Docker Engine API (Docker, or Podman's compatible
// service) over a unix socket (or TCP), through libcurl. Knows nothing of tasks.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace baton {

struct HttpResponse {
  long status = 0;
  std::string body;
};

// Thread-safe: every request uses its own connection (a few hundred microseconds over a
// unix socket), so concurrent tasks never wait for each other here.
class DockerClient {
 public:
  using Clock = std::chrono::steady_clock;

  // `host`: unix:///path/to/socket, or tcp://host:port. Errors come from Ping.
  explicit DockerClient(std::string host, std::string api_version = "v1.41");

  const std::string& host() const { return host_; }

  // A request with a deadline: the whole response is collected. A transport failure is
  // Unavailable; any HTTP status is a response.
  Result<HttpResponse> Call(std::string_view method, const std::string& path,
                            const std::string& body = "",
                            std::chrono::milliseconds timeout = std::chrono::seconds(60),
                            const std::vector<std::string>& headers = {}) const;

  // A streamed request: `on_data` gets the body as it arrives (on the calling thread);
  // `keep_going` is asked at least every 50 ms and ends the request when it says no
  // (the result is then Cancelled); `deadline` ends it with DeadlineExceeded. Returns the
  // HTTP status.
  Result<long> Stream(std::string_view method, const std::string& path, const std::string& body,
                      const std::function<void(std::string_view)>& on_data,
                      const std::function<bool()>& keep_going, Clock::time_point deadline,
                      const std::vector<std::string>& headers = {}) const;

  // GET /_ping within `timeout`.
  Status Ping(std::chrono::milliseconds timeout = std::chrono::seconds(2)) const;

 private:
  std::string host_;
  std::string socket_path_;  // for unix://
  std::string base_url_;     // http://…/v1.41
};

// The message of an API error response ({"message": …}), or the body itself.
std::string ApiErrorMessage(const HttpResponse& response);

// Percent-encodes a query parameter value or path segment.
std::string UrlEncode(std::string_view text);

}  // namespace baton
