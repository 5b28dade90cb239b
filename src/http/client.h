// The one outgoing HTTP client: a small blocking client over libcurl's easy interface
// (libcurl stays in this folder). Webhook deliveries, the RabbitMQ management API and the
// `baton` command all send their requests through it.
//
// Thread-safety: a Client holds no state of its own; Send may be called from several
// threads at once, each call using its own libcurl handle.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace baton::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct ClientRequest {
  std::string method = "GET";  // any token: GET, POST, PUT, DELETE, ...
  std::string url;             // http:// or https://; other schemes are refused
  Headers headers;
  // Sent as it is, with its Content-Length (0 included) for every method but GET and
  // HEAD, so a server never waits for a body that is not coming.
  std::string body;
  // The whole exchange, from connecting to the last byte of the response.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  // HTTP basic credentials, sent when `user` is not empty.
  std::string user;
  std::string password;
  // A PEM file of the certificate authorities an https server's certificate must chain to
  // (a private CA, a self-signed certificate); empty: the system's trust store.
  std::string ca_file;
  // A response body larger than this fails the call (FailedPrecondition) instead of
  // growing without bound; with `on_body`, the limit is on what was streamed.
  std::size_t max_response_bytes = std::size_t{16} << 20;
  // When set, each piece of the body is handed to it as it arrives, and ClientResponse::body
  // stays empty: for answers that stream (a log followed as it is written). Returning
  // false ends the call with Cancelled.
  std::function<bool(std::string_view)> on_body;
  // Polled while the call waits; once it returns true the call ends with Cancelled
  // ("stopped").
  std::function<bool()> stopped;
  // When set, asked before each connection with the address the host resolved to (4 or
  // 16 bytes, network order); a non-empty answer (why) refuses that address, so nothing
  // is sent to it. When every address tried was refused, the call fails with
  // FailedPrecondition "refused by policy: <why>", whatever listens there. With it set,
  // no proxy is used (a proxy's own address would be the one checked).
  std::function<std::string(std::span<const std::uint8_t>)> refuse_address;
};

struct ClientResponse {
  int status = 0;
  Headers headers;  // in the order received, names lowercase
  std::string body;

  // The first header named `name` (any case).
  std::optional<std::string> Header(std::string_view name) const;
};

class Client {
 public:
  Client();

  // Sends `request` and waits for the whole answer (redirects are not followed). Any
  // status the server answered is a ClientResponse; errors are about not getting one:
  // InvalidArgument (a bad URL or scheme), Unavailable (no connection, a TLS failure, the
  // connection broke; the message says which, e.g. "connection refused"),
  // DeadlineExceeded (`timeout`), Cancelled (`stopped`, `on_body`), FailedPrecondition
  // (the response exceeded `max_response_bytes`, or `refuse_address` refused it).
  Result<ClientResponse> Send(const ClientRequest& request) const;
};

// The host of an http(s) URL, lowercase, without port, user info or brackets; empty when
// `url` has none.
std::string UrlHost(std::string_view url);

}  // namespace baton::http
