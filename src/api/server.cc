#include "api/server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>

#include "base/log.h"

namespace baton::api {

Result<std::pair<std::string, int>> ParseAddress(std::string_view address) {
  auto colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument(fmt::format("address \"{}\": expected HOST:PORT", address));
  }
  std::string host(address.substr(0, colon));
  if (host.empty()) host = "localhost";
  std::string_view port_text = address.substr(colon + 1);
  int port = -1;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("address \"{}\": bad port \"{}\"", address, port_text));
  }
  return std::pair{host, port};
}

Server::Server(Api& api, ServerOptions options, std::size_t max_body_bytes)
    : api_(api), options_(std::move(options)), max_body_bytes_(max_body_bytes) {}

Server::~Server() { Stop(); }

Status Server::Start() {
  server_ = std::make_unique<httplib::Server>();
  int threads = std::max(1, options_.threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // Bodies a little over the limit are read so the API can answer 413 with a message;
  // far bigger ones are refused by httplib before reading (the error handler adds one).
  server_->set_payload_max_length(max_body_bytes_ + 1);
  // Responses go out as headers then body: without TCP_NODELAY, Nagle's algorithm holds
  // the body back until the client's delayed ACK (~40 ms) on a kept-alive connection.
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_max_count(100000);
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(30, 0);

  auto handle = [this](const httplib::Request& req, httplib::Response& res) {
    Request request;
    request.method = req.method;
    request.path = req.path;
    for (const auto& [k, v] : req.params) request.query.emplace(k, v);
    request.content_type = req.get_header_value("Content-Type");
    request.body = req.body;
    Response response = api_.Handle(request);
    res.status = response.status;
    res.set_content(response.body, "application/json");
  };
  // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
  // 6.3), but httplib 0.11 would read a PUT/POST body until the connection closes, so
  // `curl -X PUT .../cancel` would hang: such requests are answered before any read.
  server_->set_pre_routing_handler([handle](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    handle(req, res);
    return httplib::Server::HandlerResponse::Handled;
  });
  for (const char* pattern : {"/.*", "/"}) {
    server_->Get(pattern, handle);
    server_->Post(pattern, handle);
    server_->Put(pattern, handle);
    server_->Delete(pattern, handle);
    server_->Patch(pattern, handle);
  }
  server_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 413 ? "the request body is too large"
                          : res.status == 404 ? "no such endpoint"
                                              : fmt::format("HTTP {}", res.status);
    res.set_content(fmt::format(R"({{"message":"{}","code":"INVALID_ARGUMENT"}})", message),
                    "application/json");
  });
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content(R"({"message":"internal error","code":"INTERNAL"})", "application/json");
  });

  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    if (port_ < 0) return Unavailable(fmt::format("cannot listen on {}", options_.host));
  } else {
    if (!server_->bind_to_port(options_.host, options_.port)) {
      return Unavailable(fmt::format("cannot listen on {}:{} (in use, or not an address of this "
                                     "machine)",
                                     options_.host, options_.port));
    }
    port_ = options_.port;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  log::Info("the REST API is listening", {{"address", fmt::format("{}:{}", options_.host, port_)}});
  return Status::Ok();
}

void Server::Stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace baton::api
