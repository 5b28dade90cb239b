// The HTTP server: Baton's own connection handling in front of cpp-httplib's request
// processing, in front of Api.
//
// A connection waiting for a request (new, or kept alive between requests) holds no
// thread: one poller thread (epoll, non-blocking sockets) owns every connection and
// buffers each request whole (a header block of at most kMaxHeaderBytes, then the body
// its Content-Length announces, up to the body limit) before a bounded pool of handler
// threads runs it; responses are written by the poller too, so no client's pace holds a
// handler. An announced Content-Length over the limit is answered 413 from the header
// block, without reading the body. A chunked body is read by its handler, bounded by the
// request deadline. A submission with `wait` is parked (its connection holds no thread)
// and answered when its job ends, its wait times out, or the server stops.
//
// Limits: `max_connections` open connections (bounded by RLIMIT_NOFILE, whose soft limit
// Bind raises to the hard one); more are answered 503 at once and closed. At most
// `max_buffered_bytes` of requests buffered in all; a request that would pass it is
// answered 503. An idle connection is closed after `keep_alive`; from a request's first
// byte, it must arrive whole within `request_timeout` (else 408 and close), and the
// client must take the response within `request_timeout` (else close).
//
// Thread-safety: Bind, Start and Stop from one thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "api/api.h"

namespace baton::api {

// The most bytes a request's line and headers may take; more is answered 431.
inline constexpr std::size_t kMaxHeaderBytes = 64 << 10;

struct ServerOptions {
  std::string host = "localhost";
  int port = 8000;  // 0: any free port (see port())
  // Connections open at once (idle ones included); more are refused with 503.
  int max_connections = 10000;
  // Threads that run complete requests.
  int handler_threads = 8;
  // Bytes of requests buffered at once over every connection.
  std::size_t max_buffered_bytes = 256 << 20;
  // An idle connection (new, or kept alive after a response) is closed after this.
  std::chrono::milliseconds keep_alive = std::chrono::seconds(5);
  // From a request's first byte, its headers and body must arrive within this; from the
  // end of its handler, the client must take the response within this.
  std::chrono::milliseconds request_timeout = std::chrono::seconds(10);
};

// Splits "HOST:PORT" (":PORT" means localhost).
Result<std::pair<std::string, int>> ParseAddress(std::string_view address);

class RequestProcessor;
class EventLoop;

// One connection's bytes in, the server's bytes out, without sockets: the same framing
// and request processing the server runs over every connection. For the fuzzer.
class HttpProtocol {
 public:
  HttpProtocol(Api& api, std::size_t max_body_bytes);
  ~HttpProtocol();
  HttpProtocol(const HttpProtocol&) = delete;
  HttpProtocol& operator=(const HttpProtocol&) = delete;

  // Serves `input` as all that a client sent on one connection before closing its side:
  // each complete request in turn until one closes the connection. A parked wait is
  // answered as soon as it can be, or as on stop (503). Returns what the server sent.
  std::string ServeBytes(std::string_view input);

 private:
  Api& api_;
  std::size_t max_body_bytes_;
  std::unique_ptr<RequestProcessor> processor_;
};

class Server {
 public:
  Server(Api& api, ServerOptions options, std::size_t max_body_bytes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Takes the address, without serving yet. Fails, saying why, when the address is taken
  // on any of the addresses the host resolves to ("cannot listen on HOST:PORT: address
  // already in use"), or is not an address of this machine.
  Status Bind();
  // Binds, unless Bind did, and starts serving.
  Status Start();
  // Stops accepting, closes idle connections and connections whose request has not
  // arrived whole, answers parked waits 503 (Api::StopWaiting), finishes the requests in
  // progress (their responses bounded by request_timeout, at most 3 s), and returns.
  void Stop();
  int port() const { return port_; }

 private:
  Api& api_;
  ServerOptions options_;
  std::size_t max_body_bytes_;
  std::unique_ptr<RequestProcessor> processor_;
  std::unique_ptr<EventLoop> loop_;
  int listen_fd_ = -1;
  int port_ = 0;
  bool bound_ = false;
};

}  // namespace baton::api
