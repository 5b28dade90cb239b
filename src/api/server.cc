#include "api/server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>

#include "base/log.h"

namespace baton::api {

using Clock = std::chrono::steady_clock;

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

namespace {

// SO_REUSEADDR alone: a restarted server binds at once while its old connections sit in
// TIME_WAIT, but a second server on a listening address fails. httplib's default sets
// SO_REUSEPORT instead, which lets any number of servers share the port and the kernel
// split the connections between them.
void ReuseAddressOnly(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// Binds a throwaway socket to each address `host` resolves to, with the options the
// server uses. httplib binds the first address that it can, so without this a second
// server on "localhost" would quietly take 127.0.0.1 while the first holds ::1.
Status CheckAddressFree(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Unavailable(fmt::format("cannot listen on {}:{}: {}", host, port, gai_strerror(rc)));
  }
  Status status = Status::Ok();
  for (addrinfo* a = found; a != nullptr && status.ok(); a = a->ai_next) {
    int sock = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (sock < 0) continue;
    ReuseAddressOnly(sock);
    if (a->ai_family == AF_INET6) {
      int no = 0;  // as httplib does: an IPv6 wildcard takes IPv4 too
      setsockopt(sock, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    }
    // Only a conflict is decided here; an address this machine lacks (::1 without IPv6)
    // is left to httplib, which binds the others.
    if (bind(sock, a->ai_addr, a->ai_addrlen) != 0 && (errno == EADDRINUSE || errno == EACCES)) {
      status = Unavailable(fmt::format("cannot listen on {}:{}: {}", host, port,
                                       errno == EADDRINUSE
                                           ? "address already in use (is another server there?)"
                                           : std::strerror(errno)));
    }
    close(sock);
  }
  freeaddrinfo(found);
  return status;
}

// The connection a request thread is serving, so the handler can lift the read deadline
// while it runs; and whether the accepting thread must refuse the connection it hands on.
class ConnectionStream;
thread_local ConnectionStream* current_connection = nullptr;
thread_local bool refuse_connection = false;

// One accepted socket as httplib's Stream, reading through a buffer. Every wait is bounded
// by a deadline and also ends when the server stops (its stop eventfd becomes readable).
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, int stop_fd) : sock_(sock), stop_fd_(stop_fd) {}

  void SetDeadline(Clock::time_point deadline) { deadline_ = deadline; }
  void ClearDeadline() { deadline_ = Clock::time_point::max(); }

  // Whether a request has begun (bytes are buffered or arrive before the deadline).
  bool WaitForData() const { return off_ < len_ || Poll(POLLIN); }

  bool is_readable() const override { return WaitForData(); }
  bool is_writable() const override { return Poll(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ >= len_) {
      if (!Poll(POLLIN)) return -1;
      if (size >= sizeof(buffer_)) return Receive(ptr, size);
      ssize_t n = Receive(buffer_, sizeof(buffer_));
      if (n <= 0) return n;
      off_ = 0;
      len_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, len_ - off_);
    std::memcpy(ptr, buffer_ + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  // Writes all of it or fails: httplib ignores a short count on the header block.
  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      ssize_t n = send(sock_, ptr + done, size - done, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!Poll(POLLOUT)) return -1;
      } else {
        return -1;
      }
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t Receive(char* into, size_t size) {
    for (;;) {
      ssize_t n = recv(sock_, into, size, 0);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  // Waits for `events` on the socket until the deadline; false on timeout, or on stop
  // when reading.
  bool Poll(short events) const {
    for (;;) {
      int timeout = -1;
      if (deadline_ != Clock::time_point::max()) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
        if (left.count() <= 0) return false;
        timeout = static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30));
      }
      // Stopping ends waits for a request, not the sending of a response.
      pollfd fds[2] = {{sock_, events, 0}, {stop_fd_, POLLIN, 0}};
      int n = poll(fds, events == POLLIN ? 2 : 1, timeout);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || fds[1].revents != 0) return false;
      return fds[0].revents != 0;  // an error or hang-up too: the next call reports it
    }
  }

  template <typename F>
  void Address(F name_of, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ip.clear();
    port = -1;
    if (name_of(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
      port = ntohs(v4->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int sock_;
  int stop_fd_;
  Clock::time_point deadline_ = Clock::time_point::max();
  char buffer_[4096];
  size_t off_ = 0;
  size_t len_ = 0;
};

// httplib's task queue: a thread per connection, up to `cap` at once. Threads are reused
// (one that finds no connection for a minute ends); a connection that finds every thread
// busy is refused on the accepting thread (refuse_connection), never queued.
//
// Thread-safety: enqueue from httplib's accepting thread; shutdown once, from it too.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(int cap) : cap_(static_cast<std::size_t>(std::max(1, cap))) {}
  ~ConnectionThreads() override = default;

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      JoinEnded();
      if (pending_.size() < idle_) {
        pending_.push_back(std::move(fn));
        cv_.notify_one();
        return;
      }
      if (threads_.size() < cap_) {
        // The new thread touches `threads_` only under mu_, so after this assignment.
        auto it = threads_.emplace(threads_.end());
        *it =
            std::thread([this, it, first = std::move(fn)]() mutable { Run(it, std::move(first)); });
        return;
      }
    }
    refuse_connection = true;
    fn();
    refuse_connection = false;
  }

  void shutdown() override {
    std::list<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      threads.splice(threads.end(), threads_);
      threads.splice(threads.end(), ended_);
    }
    cv_.notify_all();
    for (std::thread& t : threads) t.join();
  }

 private:
  using Handle = std::list<std::thread>::iterator;

  void Run(Handle self, std::function<void()> fn) {
    for (;;) {
      fn();
      fn = nullptr;
      std::unique_lock lock(mu_);
      ++idle_;
      bool woken = cv_.wait_for(lock, std::chrono::minutes(1),
                                [&] { return stopping_ || !pending_.empty(); });
      --idle_;
      if (!pending_.empty()) {
        fn = std::move(pending_.front());
        pending_.pop_front();
        continue;
      }
      // Stopping: shutdown joins this thread. Idle for a minute: the next enqueue does.
      if (!woken && !stopping_) ended_.splice(ended_.end(), threads_, self);
      return;
    }
  }

  // Joins threads that have left Run (they hold no lock once listed).
  void JoinEnded() {
    for (std::thread& t : ended_) t.join();
    ended_.clear();
  }

  const std::size_t cap_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::thread> threads_;             // guarded by mu_
  std::list<std::thread> ended_;               // guarded by mu_
  std::deque<std::function<void()>> pending_;  // guarded by mu_
  std::size_t idle_ = 0;                       // guarded by mu_
  bool stopping_ = false;                      // guarded by mu_
};

}  // namespace

// httplib's Server with its connection loop replaced: the keep-alive wait, the request
// deadline and the refusal of connections over the cap (see server.h).
class HttpServer final : public httplib::Server {
 public:
  explicit HttpServer(ServerOptions options) : options_(std::move(options)) {
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
  }
  ~HttpServer() override {
    if (stop_fd_ >= 0) close(stop_fd_);
  }

  // Wakes every connection waiting for a request, so stop() does not wait out keep-alive.
  void WakeForStop() {
    std::uint64_t one = 1;
    if (stop_fd_ >= 0 && ::write(stop_fd_, &one, sizeof(one)) < 0) {
      log::Warn("cannot wake the API's idle connections", {{"error", std::strerror(errno)}});
    }
  }

  // httplib listens with a backlog of 5: a burst of new connections (36 at once in the
  // tests) overflows it while the accepting thread starts threads, and the kernel drops
  // the overflow, whose clients retry a second later. Listening again only resizes it.
  bool RaiseBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }

  // Closes the listening socket, which ends httplib's accept loop. httplib's stop() does
  // the same only once that loop has begun, so a Stop right after Start would hang.
  void CloseListener() {
    socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) {
      ::shutdown(sock, SHUT_RDWR);
      close(sock);
    }
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool ok = true;
    if (refuse_connection) {
      Refuse(sock);
    } else {
      ConnectionStream stream(sock, stop_fd_);
      current_connection = &stream;
      for (std::size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET;
           --left) {
        stream.SetDeadline(Clock::now() + options_.keep_alive);
        if (!stream.WaitForData()) break;
        stream.SetDeadline(Clock::now() + options_.request_timeout);
        bool closed = false;
        ok = process_request(stream, /*close_connection=*/left == 1, closed, nullptr);
        if (!ok || closed) break;
      }
      current_connection = nullptr;
    }
    ::shutdown(sock, SHUT_RDWR);
    close(sock);
    return ok;
  }

  // Answers 503 without reading the request, on the accepting thread, so it must not
  // block: the reply fits any socket buffer, and what the client already sent is drained
  // so that closing does not reset the connection before the client reads the reply.
  void Refuse(int sock) {
    std::string body = fmt::format(
        R"({{"message":"the server is serving {} connections, its limit (api.max_connections): try again later","code":"UNAVAILABLE"}})",
        options_.max_connections);
    std::string reply = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n{}",
        body.size(), body);
    ssize_t sent = send(sock, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(sock, SHUT_WR);
    char drain[16384];
    while (recv(sock, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
    }
    if (sent != static_cast<ssize_t>(reply.size())) {
      log::Warn("could not send the API's 503 refusal", {{"error", std::strerror(errno)}});
    }
  }

  ServerOptions options_;
  int stop_fd_ = -1;
};

Server::Server(Api& api, ServerOptions options, std::size_t max_body_bytes)
    : api_(api), options_(std::move(options)), max_body_bytes_(max_body_bytes) {}

Server::~Server() { Stop(); }

Status Server::Bind() {
  if (bound_) return Status::Ok();
  server_ = std::make_unique<HttpServer>(options_);
  int cap = std::max(1, options_.max_connections);
  // httplib owns the queue it gets from this factory (a raw pointer is its interface).
  server_->new_task_queue = [cap] { return new ConnectionThreads(cap); };
  server_->set_socket_options(ReuseAddressOnly);
  // Bodies a little over the limit are read so the API can answer 413 with a message;
  // far bigger ones are refused by httplib before reading (the error handler adds one).
  server_->set_payload_max_length(max_body_bytes_ + 1);
  // Responses go out as headers then body: without TCP_NODELAY, Nagle's algorithm holds
  // the body back until the client's delayed ACK (~40 ms) on a kept-alive connection.
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_max_count(100000);
  // Also set on each accepted socket by httplib: bounds a single blocking call; the
  // request deadline (ConnectionStream) bounds the whole request.
  auto timeout = std::chrono::duration_cast<std::chrono::seconds>(options_.request_timeout) +
                 std::chrono::seconds(1);
  server_->set_read_timeout(timeout);
  server_->set_write_timeout(timeout);

  auto handle = [this](const httplib::Request& req, httplib::Response& res) {
    // The handler may take long (a submission with `wait`): no read deadline meanwhile,
    // and the client gets request_timeout to take the response from its end.
    if (current_connection != nullptr) current_connection->ClearDeadline();
    Request request;
    request.method = req.method;
    request.path = req.path;
    for (const auto& [k, v] : req.params) request.query.emplace(k, v);
    request.content_type = req.get_header_value("Content-Type");
    request.body = req.body;
    Response response = api_.Handle(request);
    res.status = response.status;
    res.set_content(response.body, "application/json");
    if (current_connection != nullptr) {
      current_connection->SetDeadline(Clock::now() + options_.request_timeout);
    }
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
    std::string message = res.status == 413   ? "the request body is too large"
                          : res.status == 404 ? "no such endpoint"
                                              : fmt::format("HTTP {}", res.status);
    res.set_content(fmt::format(R"({{"message":"{}","code":"INVALID_ARGUMENT"}})", message),
                    "application/json");
  });
  server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(R"({"message":"internal error","code":"INTERNAL"})", "application/json");
      });

  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    if (port_ < 0) {
      server_.reset();
      return Unavailable(
          fmt::format("cannot listen on {}: {}", options_.host, std::strerror(errno)));
    }
  } else {
    Status free = CheckAddressFree(options_.host, options_.port);
    if (!free.ok()) {
      server_.reset();
      return free;
    }
    if (!server_->bind_to_port(options_.host, options_.port)) {
      int error = errno;
      server_.reset();
      return Unavailable(
          fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port,
                      error == EADDRINUSE ? "address already in use" : std::strerror(error)));
    }
    port_ = options_.port;
  }
  if (!server_->RaiseBacklog()) {
    log::Warn("cannot raise the API's listen backlog", {{"error", std::strerror(errno)}});
  }
  bound_ = true;
  return Status::Ok();
}

Status Server::Start() {
  BATON_RETURN_IF_ERROR(Bind());
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  log::Info("the REST API is listening", {{"address", fmt::format("{}:{}", options_.host, port_)}});
  return Status::Ok();
}

void Server::Stop() {
  if (!server_) return;
  server_->WakeForStop();
  api_.StopWaiting();
  server_->CloseListener();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  bound_ = false;
}

}  // namespace baton::api
