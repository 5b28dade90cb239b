#include "http/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/log.h"
#include "http/handler_pool.h"
#include "http/session.h"
#include "http/tls.h"

namespace baton::http {

namespace asio = boost::asio;
using internal::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

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

Response ErrorResponse(int status, std::string_view code, const std::string& message) {
  nlohmann::json body = {{"message", message}, {"code", code}};
  Response response;
  response.status = status;
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (status == 503) response.headers.emplace_back("Retry-After", "1");
  return response;
}

namespace {

std::string AddressInUse(const std::string& host, int port, int error) {
  return fmt::format("cannot listen on {}:{}: {}", host, port,
                     error == EADDRINUSE ? "address already in use (is another server there?)"
                                         : std::strerror(error));
}

// The endpoints `host` resolves to, IPv4 first.
Result<std::vector<tcp::endpoint>> Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  const char* node = host.empty() || host == "*" ? nullptr : host.c_str();
  if (int rc = getaddrinfo(node, service.c_str(), &hints, &found); rc != 0) {
    return Unavailable(fmt::format("cannot listen on {}:{}: {}", host, port, gai_strerror(rc)));
  }
  std::vector<tcp::endpoint> endpoints;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    tcp::endpoint endpoint;
    std::memcpy(endpoint.data(), a->ai_addr, a->ai_addrlen);
    endpoint.resize(a->ai_addrlen);
    endpoints.push_back(endpoint);
  }
  freeaddrinfo(found);
  std::stable_sort(endpoints.begin(), endpoints.end(), [](const auto& a, const auto& b) {
    return a.protocol() == tcp::v4() && b.protocol() != tcp::v4();
  });
  return endpoints;
}

// Raises the soft limit on open descriptors to the hard one, and returns how many
// connections fit in it, leaving room for the rest of the process (datastore, tasks).
std::size_t ConnectionsThatFit(int wanted) {
  wanted = std::max(1, wanted);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return static_cast<std::size_t>(wanted);
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY) return static_cast<std::size_t>(wanted);
  auto soft = static_cast<std::int64_t>(limit.rlim_cur);
  std::int64_t reserve = soft >= 1024 ? 256 : soft / 2;
  auto fit = static_cast<int>(std::clamp<std::int64_t>(soft - reserve, 1, wanted));
  if (fit < wanted) {
    log::Warn(
        "the API serves fewer connections than api.max_connections: the limit on open "
        "files (RLIMIT_NOFILE) is lower",
        {{"max_connections", std::to_string(wanted)},
         {"serving", std::to_string(fit)},
         {"nofile", std::to_string(soft)}});
  }
  return static_cast<std::size_t>(fit);
}

// Answers 503 without reading the request, and closes. It must not block: the reply fits
// any socket buffer, and what the client already sent is drained so that closing does
// not reset the connection before the client reads the reply.
void Refuse(tcp::socket& socket, const std::string& message) {
  std::string reply = internal::Serialize(ErrorResponse(503, "UNAVAILABLE", message), false, true);
  int fd = socket.native_handle();
  if (send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    log::Warn("could not send the API's 503 refusal", {{"error", std::strerror(errno)}});
  }
  ::shutdown(fd, SHUT_WR);
  char drain[16384];
  while (recv(fd, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
  }
  error_code ec;
  socket.close(ec);
}

}  // namespace

// The I/O thread, its acceptors and sessions, and the handler pool (see server.h).
class Server::Impl {
 public:
  Impl(Handler handler, ServerOptions options, std::size_t max_body_bytes)
      : handler_(std::move(handler)),
        options_(std::move(options)),
        pool_(options_.handler_threads),
        io_handle_(std::make_shared<internal::IoHandle>(io_)),
        shared_{options_, max_body_bytes, handler_, pool_, io_handle_, 0, false, {}, 1, {0}} {
    if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
      tls_.emplace(options_.tls_cert, options_.tls_key);
    }
  }

  ~Impl() { Stop(); }

  Status Listen(int& port);
  Status Start();
  void Stop();
  Status ReloadTls();
  std::string ServeBytes(std::string_view input);

 private:
  Status ListenOn(const tcp::endpoint& endpoint, int& port);
  void Accept(tcp::acceptor& acceptor);
  void OnAccepted(tcp::acceptor& acceptor, tcp::socket socket);
  // Out of descriptors: the spare one lets a connection be taken and closed, not left in
  // the backlog to wake the acceptor for ever.
  void ShedOne(tcp::acceptor& acceptor);
  void DrainBacklog(tcp::acceptor& acceptor);
  void Adopt(tcp::socket socket);
  void WatchHangUp();
  void RunIo();

  Handler handler_;
  const ServerOptions options_;
  asio::io_context io_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors_;
  std::optional<asio::signal_set> hangup_;
  std::optional<TlsContexts> tls_;
  HandlerPool pool_;
  std::shared_ptr<internal::IoHandle> io_handle_;
  internal::Shared shared_;
  std::size_t cap_ = 0;
  int reserve_fd_ = -1;
  std::thread io_thread_;
  bool started_ = false;
};

Status Server::Impl::Listen(int& port) {
  if (tls_) BATON_RETURN_IF_ERROR(tls_->Load());
  BATON_ASSIGN_OR_RETURN(auto endpoints, Resolve(options_.host, options_.port));
  for (const tcp::endpoint& endpoint : endpoints) {
    tcp::endpoint at = endpoint;
    // Port 0: the first address picks the port, and the others take the same one.
    if (port != 0) at.port(static_cast<unsigned short>(port));
    Status listened = ListenOn(at, port);
    // A port picked for the first address may be taken on another: that one is left out.
    if (!listened.ok() && options_.port == 0 && !acceptors_.empty()) continue;
    if (!listened.ok()) {
      acceptors_.clear();
      return listened;
    }
  }
  if (acceptors_.empty()) {
    return Unavailable(
        fmt::format("cannot listen on {}:{}: no address", options_.host, options_.port));
  }
  return Status::Ok();
}

// SO_REUSEADDR alone: a restarted server binds at once while its old connections sit in
// TIME_WAIT, but a second server on a listening address fails (SO_REUSEPORT would let
// both listen and split the connections). An address this machine lacks (::1 without
// IPv6) is skipped; a taken one fails.
Status Server::Impl::ListenOn(const tcp::endpoint& endpoint, int& port) {
  auto acceptor = std::make_unique<tcp::acceptor>(io_);
  error_code ec;
  acceptor->open(endpoint.protocol(), ec);
  if (ec) return Status::Ok();
  acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (endpoint.protocol() == tcp::v6()) {
    // An IPv6 wildcard takes IPv4 too; ::1 beside 127.0.0.1 must not.
    acceptor->set_option(asio::ip::v6_only(!endpoint.address().is_unspecified()), ec);
  }
  acceptor->bind(endpoint, ec);
  if (ec == asio::error::address_in_use || ec == asio::error::access_denied) {
    return Unavailable(AddressInUse(options_.host, endpoint.port(), ec.value()));
  }
  if (ec) return Status::Ok();
  acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable(AddressInUse(options_.host, endpoint.port(), ec.value()));
  acceptor->non_blocking(true, ec);
  port = acceptor->local_endpoint(ec).port();
  acceptors_.push_back(std::move(acceptor));
  return Status::Ok();
}

Status Server::Impl::Start() {
  if (started_) return Status::Ok();
  started_ = true;
  cap_ = ConnectionsThatFit(options_.max_connections);
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  work_.emplace(io_.get_executor());
  pool_.Start();
  for (auto& acceptor : acceptors_) Accept(*acceptor);
  if (tls_) {
    hangup_.emplace(io_, SIGHUP);
    WatchHangUp();
  }
  io_thread_ = std::thread([this] { RunIo(); });
  return Status::Ok();
}

void Server::Impl::RunIo() {
  for (;;) {
    try {
      io_.run();
      return;
    } catch (const std::exception& e) {
      log::Error("the API's I/O thread caught an error; it goes on", {{"error", e.what()}});
    }
  }
}

void Server::Impl::WatchHangUp() {
  hangup_->async_wait([this](error_code ec, int) {
    if (ec) return;
    Status reloaded = ReloadTls();
    if (reloaded.ok()) {
      log::Info("reloaded the API's TLS certificate (SIGHUP)", {{"cert", options_.tls_cert}});
    } else {
      log::Error("cannot reload the API's TLS certificate; the old one stays",
                 {{"error", std::string(reloaded.message())}});
    }
    WatchHangUp();
  });
}

Status Server::Impl::ReloadTls() {
  if (!tls_) return FailedPrecondition("the API does not serve HTTPS (api.tls.cert is not set)");
  return tls_->Load();
}

void Server::Impl::Accept(tcp::acceptor& acceptor) {
  acceptor.async_accept([this, &acceptor](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec == asio::error::no_descriptors || ec.value() == ENFILE) {
      ShedOne(acceptor);
    } else if (ec) {
      log::Warn("the API cannot accept a connection", {{"error", ec.message()}});
    } else {
      OnAccepted(acceptor, std::move(socket));
      DrainBacklog(acceptor);
    }
    Accept(acceptor);
  });
}

// A burst of connections (2,000 at once) is taken here in one go, without a round trip
// through the reactor for each: the health check queued behind them waits less.
void Server::Impl::DrainBacklog(tcp::acceptor& acceptor) {
  for (int i = 0; i < 512; ++i) {
    error_code ec;
    tcp::socket next(io_);
    acceptor.accept(next, ec);  // non-blocking: would_block once the backlog is empty
    if (ec) return;
    OnAccepted(acceptor, std::move(next));
  }
}

void Server::Impl::ShedOne(tcp::acceptor& acceptor) {
  if (reserve_fd_ < 0) return;
  close(reserve_fd_);
  error_code ec;
  tcp::socket socket(io_);
  acceptor.accept(socket, ec);
  if (!ec) Refuse(socket, "the server has no file descriptors left");
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void Server::Impl::OnAccepted(tcp::acceptor&, tcp::socket socket) {
  if (shared_.stopping) return;
  if (shared_.sessions.size() >= cap_) {
    if (tls_) return;  // a TLS client cannot read a plain refusal: the close says it
    return Refuse(socket, fmt::format("the server has {} connections open, its limit "
                                      "(api.max_connections): try again later",
                                      cap_));
  }
  Adopt(std::move(socket));
}

void Server::Impl::Adopt(tcp::socket socket) {
  std::uint64_t id = shared_.next_id++;
  std::shared_ptr<internal::SessionBase> session;
  if (tls_) {
    session = std::make_shared<internal::Session<asio::ssl::stream<tcp::socket>>>(
        shared_, id, std::move(socket), *tls_->Current());
  } else {
    session = std::make_shared<internal::Session<tcp::socket>>(shared_, id, std::move(socket));
  }
  shared_.sessions.emplace(id, session);
  shared_.open = shared_.sessions.size();
  session->Start();
}

void Server::Impl::Stop() {
  if (!started_) return;
  started_ = false;
  auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(options_.request_timeout,
                                                                     std::chrono::seconds(3));
  asio::post(io_, [this] {
    shared_.stopping = true;
    for (auto& acceptor : acceptors_) acceptor->close();
    if (hangup_) hangup_->cancel();
    std::vector<std::shared_ptr<internal::SessionBase>> open;
    for (auto& [id, weak] : shared_.sessions) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
    for (auto& session : open) session->OnStop();
  });
  // The requests in progress finish, and their answers go, until the deadline.
  while (shared_.open > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pool_.Stop();
  io_handle_->Close();
  work_.reset();
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
  // The I/O thread is gone: what is left is closed from here.
  std::vector<std::shared_ptr<internal::SessionBase>> left;
  for (auto& [id, weak] : shared_.sessions) {
    if (auto session = weak.lock()) left.push_back(std::move(session));
  }
  for (auto& session : left) session->Close();
  shared_.sessions.clear();
  acceptors_.clear();
  if (reserve_fd_ >= 0) close(reserve_fd_);
  reserve_fd_ = -1;
}

std::string Server::Impl::ServeBytes(std::string_view input) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return {};
  asio::post(io_, [this, fd = fds[0]] {
    tcp::socket socket(io_);
    error_code ec;
    socket.assign(tcp::v4(), fd, ec);
    if (ec) {
      close(fd);
      return;
    }
    Adopt(std::move(socket));
  });
  std::string sent;
  std::size_t off = 0;
  char buf[65536];
  auto deadline = Clock::now() + std::chrono::seconds(30);
  for (bool shut = false; Clock::now() < deadline;) {
    if (!shut && off == input.size()) {
      ::shutdown(fds[1], SHUT_WR);
      shut = true;
    }
    pollfd p{fds[1], static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    if ((p.revents & POLLOUT) != 0) {
      ssize_t n = send(fds[1], input.data() + off, input.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) off += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN) off = input.size();  // the server closed: stop sending
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t n = recv(fds[1], buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) sent.append(buf, static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN)) break;
    }
  }
  close(fds[1]);
  return sent;
}

Server::Server(Handler handler, ServerOptions options, std::size_t max_body_bytes)
    : impl_(std::make_unique<Impl>(std::move(handler), std::move(options), max_body_bytes)) {}

Server::~Server() { Stop(); }

Status Server::Listen() { return impl_->Listen(port_); }
Status Server::Start() { return impl_->Start(); }
void Server::Stop() { impl_->Stop(); }
Status Server::ReloadTls() { return impl_->ReloadTls(); }
std::string Server::ServeBytes(std::string_view input) { return impl_->ServeBytes(input); }

}  // namespace baton::http
