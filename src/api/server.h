// The REST API over HTTP: the server of http/server.h in front of Api. It adapts requests
// and answers, parks submissions with `wait` as long polls (answered when their job ends,
// their wait times out, or the server stops), and holds GET /events streams as long polls
// that stream. http/server.h says what the server promises (threads, limits, TLS).
//
// Thread-safety: Bind, Start and Stop from one thread.
#pragma once

#include <memory>
#include <string>

#include "api/api.h"
#include "http/server.h"

namespace baton::api {

using http::kMaxHeaderBytes;
using http::ParseAddress;
using ServerOptions = http::ServerOptions;

class WaitRoom;

// One connection's bytes in, the server's bytes out, over a socket pair: the same server
// and request processing every connection runs. For the fuzzer. A parked wait is answered
// as soon as it can be, or as on stop (503); an event stream sends what it has, then ends.
class HttpProtocol {
 public:
  HttpProtocol(Api& api, std::size_t max_body_bytes);
  ~HttpProtocol();
  HttpProtocol(const HttpProtocol&) = delete;
  HttpProtocol& operator=(const HttpProtocol&) = delete;

  // Serves `input` as all that a client sent on one connection before closing its side;
  // returns what the server sent.
  std::string ServeBytes(std::string_view input);

 private:
  std::unique_ptr<http::Server> server_;
};

class Server {
 public:
  Server(Api& api, ServerOptions options, std::size_t max_body_bytes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Takes the address, without serving yet (http::Server::Listen says how it fails).
  Status Bind();
  // Binds, unless Bind did, and starts serving.
  Status Start();
  // Answers parked waits 503 (Api::StopWaiting), then stops the HTTP server.
  void Stop();
  int port() const { return server_->port(); }
  // Reads api.tls.cert and api.tls.key again (also done on SIGHUP).
  Status ReloadTls() { return server_->ReloadTls(); }

 private:
  Api& api_;
  std::string address_;
  std::unique_ptr<WaitRoom> waits_;  // outlives server_, whose polls it holds
  std::unique_ptr<http::Server> server_;
  bool bound_ = false;
  bool started_ = false;
};

}  // namespace baton::api
