// The HTTP server: cpp-httplib in front of Api. A bounded pool of threads serves
// requests (keep-alive on), so a slow client holds one thread, never the engine.
//
// Thread-safety: Start and Stop from one thread.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "api/api.h"

namespace httplib {
class Server;
}

namespace baton::api {

struct ServerOptions {
  std::string host = "localhost";
  int port = 8000;  // 0: any free port (see port())
  int threads = 8;
};

// Splits "HOST:PORT" (":PORT" means localhost).
Result<std::pair<std::string, int>> ParseAddress(std::string_view address);

class Server {
 public:
  Server(Api& api, ServerOptions options, std::size_t max_body_bytes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds (an error says why, e.g. the port is taken) and starts serving.
  Status Start();
  // Stops accepting, finishes the requests in progress, and returns.
  void Stop();
  int port() const { return port_; }

 private:
  Api& api_;
  ServerOptions options_;
  std::size_t max_body_bytes_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace baton::api
