// The HTTP server: cpp-httplib in front of Api.
//
// Every accepted connection gets a thread of its own (threads are reused), up to
// `max_connections`; a connection beyond that is answered 503 at once and closed, never
// queued behind the others. A connection's thread is held only while the connection is
// useful: an idle keep-alive connection is closed after `keep_alive`, and a request must
// arrive whole (headers and body) within `request_timeout` of its first byte, and its
// response be taken within `request_timeout` too, so a slow client costs its own thread
// for a bounded time and never delays anyone else. A submission with `wait` holds its own
// connection's thread (asleep) while it waits; Api caps how many wait at once.
//
// Thread-safety: Bind, Start and Stop from one thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "api/api.h"

namespace baton::api {

struct ServerOptions {
  std::string host = "localhost";
  int port = 8000;  // 0: any free port (see port())
  // Connections served at once, each on its own thread; more are refused with 503.
  int max_connections = 256;
  // An idle kept-alive connection is closed after this.
  std::chrono::milliseconds keep_alive = std::chrono::seconds(5);
  // From a request's first byte, its headers and body must arrive within this; from the
  // end of its handler, the client must take the response within this.
  std::chrono::milliseconds request_timeout = std::chrono::seconds(10);
};

// Splits "HOST:PORT" (":PORT" means localhost).
Result<std::pair<std::string, int>> ParseAddress(std::string_view address);

class HttpServer;

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
  // Stops accepting, ends idle connections and waits (Api::StopWaiting), finishes the
  // requests in progress, and returns.
  void Stop();
  int port() const { return port_; }

 private:
  Api& api_;
  ServerOptions options_;
  std::size_t max_body_bytes_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  bool bound_ = false;
};

}  // namespace baton::api
