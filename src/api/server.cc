#include "api/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "base/mutex.h"

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

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
  }
  return "Unknown";
}

// A whole response that closes the connection, for answers the server gives itself
// (refusals, timeouts, parked waits) without httplib.
std::string Reply(int status, const std::string& json_body, bool retry_after = false) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n{}\r\n{}",
      status, ReasonPhrase(status), json_body.size(), retry_after ? "Retry-After: 1\r\n" : "",
      json_body);
}

std::string ErrorReply(int status, const std::string& message, std::string_view code,
                       bool retry_after = false) {
  nlohmann::json body = {{"message", message}, {"code", code}};
  return Reply(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
               retry_after);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One request cut out of a connection's bytes.
struct Framed {
  enum Kind {
    kNeedMore,  // the request has not arrived whole
    kRequest,   // `length` bytes of input are the request; `bytes` is it for httplib
    kChunked,   // `length` bytes are its header block; the chunked body follows
    kRefuse,    // answer `reply` and close, without reading on
  } kind = kNeedMore;
  std::size_t length = 0;
  std::string bytes;
  bool expect_continue = false;
  std::string reply;
};

// Cuts the first request out of `in`, the bytes a connection has sent. The header block
// ends, as httplib reads it, at the first line (after the request line) that is exactly
// CRLF; only lines ending in CRLF are headers (httplib skips the others). The framing
// headers httplib would act on are replaced by the server's own decision, so that
// httplib reads exactly the bytes framed here: Content-Length and Transfer-Encoding by one
// Content-Length (or chunked), and Expect (answered by the server) and Range (API
// responses take no ranges: a Range header of 2,600 ranges made httplib build a multipart
// response thousands of times the normal one) are dropped.
Framed FrameRequest(std::string_view in, std::size_t max_body_bytes) {
  Framed f;
  std::size_t end = std::string_view::npos;
  std::size_t first_line_end = std::string_view::npos;
  for (std::size_t pos = 0;;) {
    std::size_t nl = in.find('\n', pos);
    if (nl == std::string_view::npos || nl >= kMaxHeaderBytes) break;
    if (first_line_end == std::string_view::npos) {
      first_line_end = nl + 1;
    } else if (nl == pos + 1 && in[pos] == '\r') {
      end = nl + 1;
      break;
    }
    pos = nl + 1;
  }
  if (end == std::string_view::npos) {
    if (in.size() >= kMaxHeaderBytes) {
      f.kind = Framed::kRefuse;
      f.reply = ErrorReply(
          431, fmt::format("the request line and headers are over {} bytes", kMaxHeaderBytes),
          "INVALID_ARGUMENT");
    }
    return f;
  }
  std::string header(in.substr(0, first_line_end));
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  auto refuse = [&](int status, const std::string& message) {
    f = Framed{};
    f.kind = Framed::kRefuse;
    f.reply = ErrorReply(status, message, "INVALID_ARGUMENT");
    return f;
  };
  for (std::size_t pos = first_line_end; pos + 2 < end;) {
    std::size_t nl = in.find('\n', pos);
    std::string_view line = in.substr(pos, nl + 1 - pos);
    pos = nl + 1;
    if (line.size() < 2 || line[line.size() - 2] != '\r') {
      header += line;  // not a header for httplib
      continue;
    }
    std::string_view content = line.substr(0, line.size() - 2);
    std::size_t colon = content.find(':');
    std::string_view name = content.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? "" : Trim(content.substr(colon + 1));
    if (colon != std::string_view::npos && EqualsIgnoreCase(name, "Content-Length")) {
      std::uint64_t n = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || ptr != value.data() + value.size() ||
          (ec != std::errc() && ec != std::errc::result_out_of_range)) {
        return refuse(400, "Content-Length is not a number");
      }
      if (ec == std::errc::result_out_of_range) n = UINT64_MAX;
      if (content_length && *content_length != n) {
        return refuse(400, "the request has two different Content-Length headers");
      }
      content_length = n;
    } else if (colon != std::string_view::npos && EqualsIgnoreCase(name, "Transfer-Encoding")) {
      if (!EqualsIgnoreCase(value, "chunked")) {
        return refuse(501, fmt::format("Transfer-Encoding \"{}\" is not supported: send "
                                       "Content-Length, or chunked",
                                       value.substr(0, 40)));
      }
      chunked = true;
    } else if (colon != std::string_view::npos && EqualsIgnoreCase(name, "Expect")) {
      f.expect_continue = EqualsIgnoreCase(value, "100-continue");
    } else if (colon != std::string_view::npos && EqualsIgnoreCase(name, "Range")) {
      // dropped: see above
    } else {
      header += line;
    }
  }
  if (chunked) {
    header += "Transfer-Encoding: chunked\r\n\r\n";
    f.kind = Framed::kChunked;
    f.length = end;
    f.bytes = std::move(header);
    return f;
  }
  std::uint64_t length = content_length.value_or(0);
  if (length > max_body_bytes) {
    return refuse(413, fmt::format("the request body is {} bytes (Content-Length); the limit is {}",
                                   length, max_body_bytes));
  }
  if (in.size() - end < length) return f;  // kNeedMore, with expect_continue
  header += fmt::format("Content-Length: {}\r\n\r\n", length);
  f.kind = Framed::kRequest;
  f.length = end + length;
  f.bytes = std::move(header);
  f.bytes.append(in.substr(end, length));
  return f;
}

// A request as httplib's Stream: the bytes buffered for it, then (a chunked body) reads
// from the socket, each bounded by the request deadline and ended when the server stops
// (its stop eventfd becomes readable). What the server answers collects in output().
class BufferStream final : public httplib::Stream {
 public:
  BufferStream(std::string input, int sock, bool read_socket, int stop_fd,
               Clock::time_point deadline)
      : in_(std::move(input)),
        sock_(sock),
        read_socket_(read_socket),
        stop_fd_(stop_fd),
        deadline_(deadline) {}

  bool is_readable() const override { return off_ < in_.size() || (read_socket_ && Poll()); }
  bool is_writable() const override { return true; }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ >= in_.size()) {
      if (!read_socket_) return 0;
      in_.clear();
      off_ = 0;
      char buf[16384];
      for (;;) {
        if (!Poll()) return -1;
        ssize_t n = recv(sock_, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0) return n;
        in_.assign(buf, static_cast<std::size_t>(n));
        break;
      }
    }
    size_t n = std::min(size, in_.size() - off_);
    std::memcpy(ptr, in_.data() + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

  std::string& output() { return out_; }
  // What was read but not taken: the start of the next request.
  std::string Unread() const { return in_.substr(std::min(off_, in_.size())); }

 private:
  bool Poll() const {
    for (;;) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (left.count() <= 0) return false;
      pollfd fds[2] = {{sock_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      int n = poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || fds[1].revents != 0) return false;
      return fds[0].revents != 0;
    }
  }

  template <typename F>
  void Address(F name_of, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ip.clear();
    port = -1;
    if (sock_ < 0 || name_of(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
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

  std::string in_;
  std::size_t off_ = 0;
  std::string out_;
  int sock_;
  bool read_socket_;
  int stop_fd_;
  Clock::time_point deadline_;
};

// Where the request being processed on this thread parks its wait (null: it may not).
thread_local std::shared_ptr<PendingWait>* park_into = nullptr;
// Where it puts an event stream it answers with (GET /events), and the answer's head.
struct StreamInto {
  std::shared_ptr<EventStream> stream;
  std::string head;
};
thread_local StreamInto* stream_into = nullptr;

// A request's outcome: the response bytes, whether the connection closes after them, or
// the parked wait that will answer it later, or the event stream that follows them.
struct Served {
  std::string output;
  bool close = false;
  std::shared_ptr<PendingWait> wait;
  std::shared_ptr<EventStream> stream;
};

// The head of an event stream's answer and its first bytes: no Content-Length, so the
// body runs until the connection closes.
std::string StreamHead(const Response& response) {
  std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";
  for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
  head += "Connection: close\r\nX-Accel-Buffering: no\r\n\r\n";
  return head + response.body;
}

}  // namespace

// httplib's Server used only for its request processing (parsing, routing, responses)
// over a BufferStream, and for binding the listening socket.
class RequestProcessor final : public httplib::Server {
 public:
  RequestProcessor(Api& api, std::size_t max_body_bytes) : api_(api) {
    set_socket_options(ReuseAddressOnly);
    // Bodies a little over the limit are read so the API can answer 413 with a message.
    // (Only chunked bodies get here over the limit: the framing refuses a Content-Length.)
    set_payload_max_length(max_body_bytes + 1);
    auto handle = [this](const httplib::Request& req, httplib::Response& res) {
      Request request;
      request.method = req.method;
      request.path = req.path;
      for (const auto& [k, v] : req.params) request.query.emplace(k, v);
      request.content_type = req.get_header_value("Content-Type");
      for (const auto& [name, value] : req.headers) {
        std::string lower = name;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        request.headers[lower] = value;
      }
      request.body = req.body;
      request.remote_addr = req.remote_addr;
      request.may_park = park_into != nullptr;
      const auto began = Clock::now();
      Response response = api_.Handle(request);
      // How long the API took (the UI's and bench/'s "server time"), for every answer.
      response.headers.emplace_back(
          "Server-Timing",
          fmt::format("app;dur={:.2f}",
                      std::chrono::duration<double, std::milli>(Clock::now() - began).count()));
      if (response.stream != nullptr && stream_into != nullptr) {
        stream_into->stream = std::move(response.stream);
        stream_into->head = StreamHead(response);
        res.status = 200;  // discarded: the stream's head is sent instead
        return;
      }
      if (response.wait != nullptr && park_into != nullptr) {
        *park_into = std::move(response.wait);
        res.status = 200;  // discarded: the wait answers
        return;
      }
      res.status = response.status;
      for (const auto& [name, value] : response.headers) res.set_header(name, value);
      res.set_content(response.body, response.content_type);
    };
    for (const char* pattern : {"/.*", "/"}) {
      Get(pattern, handle);
      Post(pattern, handle);
      Put(pattern, handle);
      Delete(pattern, handle);
      Patch(pattern, handle);
      Options(pattern, handle);
    }
    set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message =
          res.status == 413   ? "the request body is too large"
          : res.status == 404 ? "no such endpoint"
          : res.status == 414
              ? fmt::format(
                    "the request's path and query are over {} bytes (a search `q` is at "
                    "most 100 words and 4096 bytes)",
                    CPPHTTPLIB_REQUEST_URI_MAX_LENGTH)
              : fmt::format("HTTP {}", res.status);
      res.set_content(fmt::format(R"({{"message":"{}","code":"INVALID_ARGUMENT"}})", message),
                      "application/json");
    });
    set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content(R"({"message":"internal error","code":"INTERNAL"})", "application/json");
    });
    set_keep_alive_max_count(std::numeric_limits<std::size_t>::max());
  }

  // Processes the one request `stream` holds; `close` asks for `Connection: close`.
  Served Serve(BufferStream& stream, bool close) {
    Served served;
    StreamInto streamed;
    park_into = &served.wait;
    stream_into = &streamed;
    bool closed = false;
    bool ok =
        process_request(stream, close, closed, [](httplib::Request& req) { req.ranges.clear(); });
    park_into = nullptr;
    stream_into = nullptr;
    served.close = !ok || closed || close;
    if (streamed.stream != nullptr) {
      served.stream = std::move(streamed.stream);
      served.output = std::move(streamed.head);
      served.close = false;
    } else if (served.wait == nullptr) {
      served.output = std::move(stream.output());
    }
    return served;
  }

  // The listening socket httplib bound, now the caller's.
  int TakeListener() { return svr_sock_.exchange(INVALID_SOCKET); }

 private:
  Api& api_;
};

HttpProtocol::HttpProtocol(Api& api, std::size_t max_body_bytes)
    : api_(api),
      max_body_bytes_(max_body_bytes),
      processor_(std::make_unique<RequestProcessor>(api, max_body_bytes)) {}

HttpProtocol::~HttpProtocol() = default;

std::string HttpProtocol::ServeBytes(std::string_view input) {
  std::string in(input);
  std::string sent;
  auto never = Clock::time_point::max();
  for (;;) {
    Framed f = FrameRequest(in, max_body_bytes_);
    if (f.expect_continue && f.kind != Framed::kRefuse) sent += "HTTP/1.1 100 Continue\r\n\r\n";
    if (f.kind == Framed::kNeedMore) return sent;  // the client closed mid-request
    if (f.kind == Framed::kRefuse) return sent + f.reply;
    std::string bytes = std::move(f.bytes);
    if (f.kind == Framed::kChunked) {
      bytes += in.substr(f.length);
      in.clear();
    } else {
      in.erase(0, f.length);
    }
    BufferStream stream(std::move(bytes), -1, false, -1, never);
    // The client sent nothing more: httplib closes after the last request, as it would
    // at the connection's end.
    Served served = processor_->Serve(stream, /*close=*/false);
    if (f.kind == Framed::kChunked) in = stream.Unread();
    if (served.stream != nullptr) {
      // An event stream holds the connection to its end: what it has so far, then close.
      return sent + served.output + served.stream->Take();
    }
    if (served.wait != nullptr) {
      std::optional<Response> answer = api_.WaitAnswer(*served.wait, /*give_up=*/false);
      if (!answer) answer = api_.WaitAnswer(*served.wait, /*give_up=*/true);
      return sent + Reply(answer->status, answer->body);
    }
    sent += served.output;
    if (served.close || in.empty()) return sent;
  }
}

// The poller, the handler threads and the waits' checker (see server.h).
class EventLoop {
 public:
  EventLoop(Api& api, RequestProcessor& processor, const ServerOptions& options,
            std::size_t max_body_bytes, int listen_fd, int max_connections)
      : api_(api),
        processor_(processor),
        options_(options),
        max_body_bytes_(max_body_bytes),
        listen_fd_(listen_fd),
        cap_(static_cast<std::size_t>(max_connections)) {}

  ~EventLoop() {
    for (int fd : {epoll_fd_, wake_fd_, stop_fd_, reserve_fd_, listen_fd_}) {
      if (fd >= 0) close(fd);
    }
  }

  Status Start() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0 || stop_fd_ < 0) {
      return Unavailable(fmt::format("cannot start the API's poller: {}", std::strerror(errno)));
    }
    fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListener;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    ev.data.u64 = kWake;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    max_writing_ = std::max(1, options_.handler_threads / 2);
    for (int i = 0; i < std::max(1, options_.handler_threads); ++i) {
      handlers_.emplace_back([this] { RunHandler(); });
    }
    waits_thread_ = std::thread([this] { RunWaits(); });
    poller_ = std::thread([this] { RunPoller(); });
    return Status::Ok();
  }

  void Stop() {
    stopping_ = true;
    Signal(stop_fd_);
    Signal(wake_fd_);
    if (poller_.joinable()) poller_.join();
    {
      MutexLock lock(tasks_mu_);
      tasks_stop_ = true;
    }
    tasks_cv_.notify_all();
    for (std::thread& t : handlers_) t.join();
    handlers_.clear();
    {
      MutexLock lock(waits_mu_);
      waits_stop_ = true;
    }
    LookAtWaits();
    if (waits_thread_.joinable()) waits_thread_.join();
  }

 private:
  static constexpr std::uint64_t kListener = 0;
  static constexpr std::uint64_t kWake = 1;

  // kStreaming: an event stream (GET /events) holds the connection, written to as its
  // events come, pinged when quiet, until either side closes.
  enum class State { kReading, kHandling, kParked, kWriting, kClosing, kStreaming };
  static constexpr auto kPingEvery = std::chrono::seconds(15);
  // A stream whose client takes less than it is sent is closed past this.
  static constexpr std::size_t kMaxStreamBacklog = 8 << 20;

  struct Connection {
    std::uint64_t id = 0;
    int fd = -1;
    State state = State::kReading;
    std::string in;   // received, not yet served
    std::string out;  // to send
    std::size_t out_off = 0;
    bool close_after = false;
    bool peer_closed = false;  // the client shut its side: serve what came, then close
    bool continue_sent = false;
    Clock::time_point request_deadline = Clock::time_point::max();
    Clock::time_point deadline = Clock::time_point::max();  // keyed in timers_
    std::uint32_t events = 0;
    bool registered = false;
    std::size_t counted = 0;              // bytes of `in` counted in buffered_
    std::shared_ptr<EventStream> stream;  // kStreaming
  };

  struct Task {
    std::uint64_t id;
    int fd;
    std::string bytes;
    bool chunked;
    bool close;
    Clock::time_point deadline;
  };

  struct Done {
    std::uint64_t id = 0;
    Served served;
    std::string unread;  // chunked: bytes read past the request
    bool chunked = false;
    bool from_wait = false;  // an answer to a parked wait, served.output ready
    std::size_t sent = 0;    // bytes of served.output the handler has sent already
  };

  // Sends what a non-blocking socket takes now; returns how many bytes.
  static std::size_t SendNow(int fd, const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        off += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break;  // full, or broken: the poller sees which
      }
    }
    return off;
  }

  static void Signal(int fd) {
    std::uint64_t one = 1;
    if (fd >= 0 && ::write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
      log::Warn("cannot wake the API's poller", {{"error", std::strerror(errno)}});
    }
  }

  void Post(Done done) {
    {
      MutexLock lock(done_mu_);
      done_.push_back(std::move(done));
    }
    Signal(wake_fd_);
  }

  // --- Handler threads.

  void RunHandler() {
    for (;;) {
      Task task;
      bool read = true;
      {
        MutexLock lock(tasks_mu_);
        // Reads go first, and at most half the threads write at once: a burst of
        // submissions (datastore writes, serialised) must not hold GET /health back, in
        // this queue or on the datastore's lock.
        auto can_write = [&] {
          tasks_mu_.AssertHeld();
          return !writes_.empty() && writing_ < max_writing_;
        };
        tasks_cv_.wait(lock, [&] {
          tasks_mu_.AssertHeld();
          return tasks_stop_ || !reads_.empty() || can_write();
        });
        if (reads_.empty() && !can_write()) {
          if (writes_.empty()) return;  // stopping; a write left waits for a writer
          continue;
        }
        read = !reads_.empty();
        std::deque<Task>& from = read ? reads_ : writes_;
        if (!read) ++writing_;
        task = std::move(from.front());
        from.pop_front();
      }
      BufferStream stream(std::move(task.bytes), task.fd, task.chunked, stop_fd_, task.deadline);
      Done done;
      done.id = task.id;
      done.served = processor_.Serve(stream, task.close);
      // The answer goes out from here as far as the socket takes it at once (all of it,
      // usually), the rest from the poller: waiting for the poller to wake to send it put
      // a second thread hand-off on every request's way (GET /health/s fell by 20 % with
      // issue 14's poller). The poller does not touch a connection while it is handled.
      if (done.served.wait == nullptr) done.sent = SendNow(task.fd, done.served.output);
      if (task.chunked) {
        done.chunked = true;
        done.unread = stream.Unread();
      }
      Post(std::move(done));
      if (!read) {
        {
          MutexLock lock(tasks_mu_);
          --writing_;
        }
        tasks_cv_.notify_all();
      }
    }
  }

  // --- The waits' checker: looks at a parked wait's job as soon as that job ends here
  // (the coordinator tells which jobs ended), and at every parked wait when one is parked
  // and at least every 200 ms (another coordinator may end a job; a wait may time out).
  // Looking only every 200 ms made each waited submission 100 ms slower on average.

  void RunWaits() {
    constexpr auto kEvery = std::chrono::milliseconds(200);
    std::uint64_t seen = api_.FinishedJobs();
    Clock::time_point next_full = Clock::now();
    for (;;) {
      // Reset before the look: a wait parked during it sets it again, and the sleep below
      // returns at once.
      bool parked_since = waits_look_again_.exchange(false);
      Coordinator::Finishes ended = api_.FinishedSince(seen);
      seen = ended.count;
      bool full = parked_since || !ended.ids || Clock::now() >= next_full;
      std::set<std::string> ended_ids;
      if (!full) ended_ids.insert(ended.ids->begin(), ended.ids->end());
      std::vector<std::pair<std::uint64_t, std::shared_ptr<PendingWait>>> parked;
      {
        MutexLock lock(waits_mu_);
        if (waits_stop_) return;
        for (const auto& [id, wait] : waits_) {
          if (full || ended_ids.contains(wait->job_id)) parked.emplace_back(id, wait);
        }
      }
      if (full) next_full = Clock::now() + kEvery;
      for (auto& [id, wait] : parked) {
        if (stopping_) break;  // the poller answers them
        std::optional<Response> answer = api_.WaitAnswer(*wait, /*give_up=*/false);
        if (!answer) continue;
        {
          MutexLock relock(waits_mu_);
          if (waits_.erase(id) == 0) continue;  // its connection went away meanwhile
        }
        Done done;
        done.id = id;
        done.served.output = Reply(answer->status, answer->body);
        done.served.close = true;
        done.from_wait = true;
        Post(std::move(done));
      }
      auto left = std::chrono::ceil<std::chrono::milliseconds>(next_full - Clock::now());
      api_.WaitForFinishes(seen, std::clamp(left, std::chrono::milliseconds(0), kEvery),
                           waits_look_again_);
    }
  }

  // Makes the waits' checker look again now.
  void LookAtWaits() {
    waits_look_again_ = true;
    api_.WakeFinishWaiters();
  }

  // --- The poller.

  void RunPoller() {
    std::vector<epoll_event> events(256);
    bool stop_handled = false;
    Clock::time_point stop_deadline;
    for (;;) {
      if (stopping_ && !stop_handled) {
        stop_handled = true;
        stop_deadline = Clock::now() + std::min<std::chrono::milliseconds>(options_.request_timeout,
                                                                           std::chrono::seconds(3));
        BeginStop();
      }
      if (stop_handled) {
        bool handling = false;
        for (auto& [id, c] : conns_) handling = handling || c->state == State::kHandling;
        if (!handling && (conns_.empty() || Clock::now() >= stop_deadline)) break;
      }
      int timeout = -1;
      if (!timers_.empty()) {
        auto left =
            std::chrono::ceil<std::chrono::milliseconds>(timers_.begin()->first - Clock::now());
        timeout = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1 << 30));
      }
      if (stop_handled) timeout = timeout < 0 ? 100 : std::min(timeout, 100);
      int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout);
      if (n < 0 && errno != EINTR) {
        log::Error("the API's poller failed", {{"error", std::strerror(errno)}});
        break;
      }
      for (int i = 0; i < n; ++i) {
        std::uint64_t id = events[static_cast<std::size_t>(i)].data.u64;
        std::uint32_t ev = events[static_cast<std::size_t>(i)].events;
        if (id == kListener) {
          Accept();
        } else if (id == kWake) {
          std::uint64_t count;
          while (::read(wake_fd_, &count, sizeof(count)) > 0) {
          }
        } else if (auto it = conns_.find(id); it != conns_.end()) {
          OnEvent(*it->second, ev);
        }
      }
      TakeDone();
      PumpStreams();
      Expire();
    }
    std::vector<std::uint64_t> ids;
    for (auto& [id, c] : conns_) ids.push_back(id);
    for (std::uint64_t id : ids) {
      if (conns_.at(id)->state != State::kHandling) Close(*conns_.at(id));
    }
  }

  void BeginStop() {
    if (listen_fd_ >= 0) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      ::shutdown(listen_fd_, SHUT_RDWR);
      close(listen_fd_);
      listen_fd_ = -1;
    }
    std::vector<Connection*> all;
    for (auto& [id, c] : conns_) all.push_back(c.get());
    for (Connection* c : all) {
      switch (c->state) {
        case State::kReading:
        case State::kClosing:
          Close(*c);
          break;
        case State::kParked:
          AnswerParkedOnStop(*c);
          break;
        case State::kStreaming:
          Close(*c);
          break;
        case State::kHandling:
        case State::kWriting:
          break;
      }
    }
  }

  void AnswerParkedOnStop(Connection& c) {
    std::shared_ptr<PendingWait> wait;
    {
      MutexLock lock(waits_mu_);
      auto it = waits_.find(c.id);
      if (it != waits_.end()) {
        wait = std::move(it->second);
        waits_.erase(it);
      }
    }
    if (wait == nullptr) {
      Close(c);
      return;
    }
    Response answer = *api_.WaitAnswer(*wait, /*give_up=*/true);
    StartWrite(c, Reply(answer.status, answer.body), /*close=*/true);
  }

  void Accept() {
    for (;;) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && reserve_fd_ >= 0) {
          // Out of descriptors: the spare one lets the connection be refused, not left
          // in the backlog to wake the poller for ever.
          close(reserve_fd_);
          reserve_fd_ = -1;
          fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd >= 0) {
            Refuse(fd, "the server has no file descriptors left");
            close(fd);
          }
          reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
          continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          log::Warn("the API cannot accept a connection", {{"error", std::strerror(errno)}});
        }
        return;
      }
      if (conns_.size() >= cap_) {
        Refuse(fd, fmt::format("the server has {} connections open, its limit "
                               "(api.max_connections): try again later",
                               cap_));
        close(fd);
        continue;
      }
      int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      auto c = std::make_unique<Connection>();
      c->id = next_id_++;
      c->fd = fd;
      Connection& ref = *c;
      conns_.emplace(c->id, std::move(c));
      Register(ref, EPOLLIN | EPOLLRDHUP);
      SetDeadline(ref, Clock::now() + options_.keep_alive);
    }
  }

  // Answers 503 without reading the request. It must not block: the reply fits any
  // socket buffer, and what the client already sent is drained so that closing does not
  // reset the connection before the client reads the reply.
  static void Refuse(int fd, const std::string& message) {
    std::string reply = ErrorReply(503, message, "UNAVAILABLE", /*retry_after=*/true);
    ssize_t sent = send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    char drain[16384];
    while (recv(fd, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
    }
    if (sent != static_cast<ssize_t>(reply.size())) {
      log::Warn("could not send the API's 503 refusal", {{"error", std::strerror(errno)}});
    }
  }

  void OnEvent(Connection& c, std::uint32_t ev) {
    switch (c.state) {
      case State::kReading:
        if ((ev & (EPOLLIN | EPOLLRDHUP)) == 0) {
          Close(c);
          return;
        }
        Read(c);
        return;
      case State::kWriting:
        if ((ev & (EPOLLERR | EPOLLHUP)) != 0) {
          Close(c);
          return;
        }
        Flush(c);
        return;
      case State::kClosing: {
        char drain[16384];
        for (;;) {
          ssize_t n = recv(c.fd, drain, sizeof(drain), 0);
          if (n > 0) continue;
          if (n < 0 && errno == EINTR) continue;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
          Close(c);
          return;
        }
      }
      case State::kParked:  // the client hung up: its wait ends (its job goes on)
        Close(c);
        return;
      case State::kStreaming: {
        if ((ev & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) != 0) {
          Close(c);
          return;
        }
        if ((ev & EPOLLIN) != 0) {
          char drain[4096];
          for (;;) {
            ssize_t n = recv(c.fd, drain, sizeof(drain), 0);
            if (n > 0) continue;  // a client sends nothing more; ignored
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            Close(c);  // closed, or broken
            return;
          }
        }
        Pump(c);
        return;
      }
      case State::kHandling:
        return;
    }
  }

  void Read(Connection& c) {
    char buf[65536];
    std::size_t round = 0;
    // Bounded per event so that one fast client does not starve the others.
    while (round < (256u << 10)) {
      ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        if (c.in.empty()) StartRequest(c);
        c.in.append(buf, static_cast<std::size_t>(n));
        round += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) {
        Close(c);
        return;
      }
      c.peer_closed = true;
      break;
    }
    Account(c);
    if (buffered_ > options_.max_buffered_bytes) {
      StartWrite(c,
                 ErrorReply(503,
                            fmt::format("the server is buffering over {} bytes of requests, its "
                                        "limit (api.max_buffered_bytes): try again later",
                                        options_.max_buffered_bytes),
                            "UNAVAILABLE", /*retry_after=*/true),
                 /*close=*/true);
      return;
    }
    Serve(c);
  }

  void StartRequest(Connection& c) {
    c.request_deadline = Clock::now() + options_.request_timeout;
    SetDeadline(c, c.request_deadline);
  }

  // Serves the request `c.in` begins with, if it has come whole.
  void Serve(Connection& c) {
    if (c.in.empty()) {
      if (c.peer_closed) Close(c);
      return;
    }
    Framed f = FrameRequest(c.in, max_body_bytes_);
    if (f.expect_continue && !c.continue_sent &&
        (f.kind == Framed::kNeedMore || f.kind == Framed::kChunked)) {
      c.continue_sent = true;
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      send(c.fd, kContinue.data(), kContinue.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    switch (f.kind) {
      case Framed::kNeedMore:
        if (c.peer_closed) Close(c);
        return;
      case Framed::kRefuse:
        StartWrite(c, std::move(f.reply), /*close=*/true);
        return;
      case Framed::kRequest:
        c.in.erase(0, f.length);
        break;
      case Framed::kChunked:
        f.bytes += c.in.substr(f.length);
        c.in.clear();
        break;
    }
    c.state = State::kHandling;
    Unregister(c);
    SetDeadline(c, Clock::time_point::max());
    {
      bool read = f.bytes.starts_with("GET ") || f.bytes.starts_with("HEAD ");
      MutexLock lock(tasks_mu_);
      (read ? reads_ : writes_)
          .push_back(Task{c.id, c.fd, std::move(f.bytes), f.kind == Framed::kChunked,
                          stopping_ || c.peer_closed, c.request_deadline});
    }
    tasks_cv_.notify_one();
  }

  void TakeDone() {
    std::vector<Done> done;
    {
      MutexLock lock(done_mu_);
      done.swap(done_);
    }
    for (Done& d : done) {
      auto it = conns_.find(d.id);
      if (it == conns_.end()) continue;
      Connection& c = *it->second;
      if (d.from_wait) {
        if (c.state == State::kParked) StartWrite(c, std::move(d.served.output), true);
        continue;
      }
      if (c.state != State::kHandling) continue;
      if (d.chunked) c.in = d.unread + c.in;
      Account(c);
      if (d.served.stream != nullptr) {
        StartStream(c, std::move(d.served.stream), std::move(d.served.output), d.sent);
        continue;
      }
      if (d.served.wait != nullptr) {
        if (stopping_) {
          Response answer = *api_.WaitAnswer(*d.served.wait, /*give_up=*/true);
          StartWrite(c, Reply(answer.status, answer.body), /*close=*/true);
          continue;
        }
        c.state = State::kParked;
        Register(c, EPOLLRDHUP);
        {
          MutexLock lock(waits_mu_);
          waits_.emplace(c.id, std::move(d.served.wait));
        }
        // Its job may have ended before it was parked, with no other end to come.
        LookAtWaits();
        continue;
      }
      StartWrite(c, std::move(d.served.output), d.served.close || c.peer_closed, d.sent);
    }
  }

  // Holds `c` open for `stream`: its head (`head`, of which the handler sent `sent`
  // bytes), then its events as they come (see Pump).
  void StartStream(Connection& c, std::shared_ptr<EventStream> stream, std::string head,
                   std::size_t sent) {
    if (stopping_) {
      stream->Close();
      StartWrite(c, std::move(head), /*close=*/true, sent);
      return;
    }
    c.state = State::kStreaming;
    c.stream = std::move(stream);
    c.out = std::move(head);
    c.out_off = sent;
    c.in.clear();
    Account(c);
    streams_.insert(c.id);
    // Called on the hub's thread, never under the stream's lock; cleared by Close before
    // the connection goes.
    c.stream->SetWake([this] {
      streams_wake_ = true;
      Signal(wake_fd_);
    });
    SetDeadline(c, Clock::now() + kPingEvery);
    Pump(c);
  }

  // Sends what `c`'s stream has for it, as far as the socket takes it now; the rest when
  // it can take more. `extra` (a ping) goes after what is pending.
  void Pump(Connection& c, std::string_view extra = {}) {
    if (c.out_off > 0) {
      c.out.erase(0, c.out_off);
      c.out_off = 0;
    }
    c.out += c.stream->Take();
    c.out += extra;
    if (c.out.size() > kMaxStreamBacklog) {
      Close(c);
      return;
    }
    switch (SendOut(c)) {
      case Sent::kAll:
        c.out.clear();
        c.out_off = 0;
        Register(c, EPOLLIN | EPOLLRDHUP);
        return;
      case Sent::kBlocked:
        Register(c, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
        return;
      case Sent::kBroken:
        Close(c);
        return;
    }
  }

  enum class Sent { kAll, kBlocked, kBroken };
  // Sends `c.out` from `c.out_off` as far as the socket takes it now.
  static Sent SendOut(Connection& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_off += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return Sent::kBlocked;
      } else {
        return Sent::kBroken;
      }
    }
    return Sent::kAll;
  }

  // The streams with events waiting (their hub woke the poller).
  void PumpStreams() {
    if (!streams_wake_.exchange(false)) return;
    std::vector<std::uint64_t> ids(streams_.begin(), streams_.end());
    for (std::uint64_t id : ids) {
      if (auto it = conns_.find(id); it != conns_.end()) Pump(*it->second);
    }
  }

  // `sent`: bytes of `bytes` already sent (by its handler).
  void StartWrite(Connection& c, std::string bytes, bool close, std::size_t sent = 0) {
    c.out = std::move(bytes);
    c.out_off = sent;
    c.close_after = close;
    c.state = State::kWriting;
    SetDeadline(c, Clock::now() + options_.request_timeout);
    Flush(c);
  }

  void Flush(Connection& c) {
    switch (SendOut(c)) {
      case Sent::kAll:
        break;
      case Sent::kBlocked:
        Register(c, EPOLLOUT);
        return;
      case Sent::kBroken:
        Close(c);
        return;
    }
    c.out.clear();
    c.out.shrink_to_fit();
    c.out_off = 0;
    if (c.close_after || stopping_) {
      // Half-close, then drop what the client still sends until it closes: closing with
      // unread bytes would reset the connection before the client reads the response.
      ::shutdown(c.fd, SHUT_WR);
      c.state = State::kClosing;
      c.in.clear();
      Account(c);
      Register(c, EPOLLIN | EPOLLRDHUP);
      SetDeadline(c, Clock::now() + std::chrono::seconds(1));
      return;
    }
    c.state = State::kReading;
    c.continue_sent = false;
    Register(c, EPOLLIN | EPOLLRDHUP);
    if (c.in.empty()) {
      SetDeadline(c, Clock::now() + options_.keep_alive);
      if (c.peer_closed) Close(c);
      return;
    }
    StartRequest(c);  // a pipelined request has begun
    Serve(c);
  }

  void Expire() {
    auto now = Clock::now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      Connection& c = *conns_.at(timers_.begin()->second);
      if (c.state == State::kStreaming) {
        // Quiet for a while: a comment keeps proxies from closing the stream, and finds
        // a client that went away without a word.
        SetDeadline(c, now + kPingEvery);
        Pump(c, ": ping\n\n");
        continue;
      }
      if (c.state == State::kReading && !c.in.empty()) {
        StartWrite(c,
                   ErrorReply(408,
                              fmt::format("the request did not arrive whole within {} ms "
                                          "(api.request_timeout)",
                                          options_.request_timeout.count()),
                              "DEADLINE_EXCEEDED"),
                   /*close=*/true);
        // A client that takes no response either is closed: the write deadline (and the
        // closing one after it) is bounded.
        continue;
      }
      Close(c);
    }
  }

  void Close(Connection& c) {
    if (c.state == State::kParked) {
      MutexLock lock(waits_mu_);
      waits_.erase(c.id);
    }
    if (c.stream != nullptr) {
      c.stream->Close();
      streams_.erase(c.id);
    }
    SetDeadline(c, Clock::time_point::max());
    if (c.registered) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    buffered_ -= c.counted;
    conns_.erase(c.id);  // destroys c
  }

  void Register(Connection& c, std::uint32_t events) {
    if (c.registered && c.events == events) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c.id;
    if (epoll_ctl(epoll_fd_, c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &ev) != 0) {
      log::Warn("cannot watch an API connection", {{"error", std::strerror(errno)}});
    }
    c.registered = true;
    c.events = events;
  }

  void Unregister(Connection& c) {
    if (!c.registered) return;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    c.registered = false;
  }

  void SetDeadline(Connection& c, Clock::time_point deadline) {
    if (c.deadline != Clock::time_point::max()) timers_.erase({c.deadline, c.id});
    c.deadline = deadline;
    if (deadline != Clock::time_point::max()) timers_.insert({deadline, c.id});
  }

  void Account(Connection& c) {
    buffered_ -= c.counted;
    c.counted = c.in.size();
    buffered_ += c.counted;
  }

  Api& api_;
  RequestProcessor& processor_;
  const ServerOptions options_;
  const std::size_t max_body_bytes_;
  int listen_fd_;
  const std::size_t cap_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int stop_fd_ = -1;     // readable once stopping: ends handlers' socket reads
  int reserve_fd_ = -1;  // given up to refuse a connection when out of descriptors
  std::atomic<bool> stopping_ = false;

  // The poller's own.
  std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> conns_;
  std::set<std::pair<Clock::time_point, std::uint64_t>> timers_;
  std::set<std::uint64_t> streams_;         // connections in kStreaming
  std::atomic<bool> streams_wake_ = false;  // set by a stream's hub: events to send
  std::size_t buffered_ = 0;
  std::uint64_t next_id_ = 2;
  std::thread poller_;

  Mutex tasks_mu_;
  std::condition_variable_any tasks_cv_;
  std::deque<Task> reads_ BATON_GUARDED_BY(tasks_mu_);   // GET and HEAD
  std::deque<Task> writes_ BATON_GUARDED_BY(tasks_mu_);  // the others
  int writing_ BATON_GUARDED_BY(tasks_mu_) = 0;          // writes being handled
  int max_writing_ = 1;                                  // set at start
  bool tasks_stop_ BATON_GUARDED_BY(tasks_mu_) = false;
  std::vector<std::thread> handlers_;

  Mutex done_mu_;
  std::vector<Done> done_ BATON_GUARDED_BY(done_mu_);

  Mutex waits_mu_;
  std::atomic<bool> waits_look_again_ = false;  // set by LookAtWaits
  std::map<std::uint64_t, std::shared_ptr<PendingWait>> waits_ BATON_GUARDED_BY(waits_mu_);
  bool waits_stop_ BATON_GUARDED_BY(waits_mu_) = false;
  std::thread waits_thread_;
};

namespace {

// Raises the soft limit on open descriptors to the hard one, and returns how many
// connections fit in it, leaving room for the rest of the process (datastore, tasks).
int ConnectionsThatFit(int wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return wanted;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY) return wanted;
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
  return fit;
}

}  // namespace

Server::Server(Api& api, ServerOptions options, std::size_t max_body_bytes)
    : api_(api), options_(std::move(options)), max_body_bytes_(max_body_bytes) {}

Server::~Server() { Stop(); }

Status Server::Bind() {
  if (bound_) return Status::Ok();
  processor_ = std::make_unique<RequestProcessor>(api_, max_body_bytes_);
  if (options_.port == 0) {
    port_ = processor_->bind_to_any_port(options_.host);
    if (port_ < 0) {
      processor_.reset();
      return Unavailable(
          fmt::format("cannot listen on {}: {}", options_.host, std::strerror(errno)));
    }
  } else {
    Status free = CheckAddressFree(options_.host, options_.port);
    if (!free.ok()) {
      processor_.reset();
      return free;
    }
    if (!processor_->bind_to_port(options_.host, options_.port)) {
      int error = errno;
      processor_.reset();
      return Unavailable(
          fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port,
                      error == EADDRINUSE ? "address already in use" : std::strerror(error)));
    }
    port_ = options_.port;
  }
  listen_fd_ = processor_->TakeListener();
  // httplib listens with a backlog of 5, which a burst of new connections overflows (the
  // kernel drops the overflow, whose clients retry a second later). Listening again only
  // resizes it.
  if (::listen(listen_fd_, SOMAXCONN) != 0) {
    log::Warn("cannot raise the API's listen backlog", {{"error", std::strerror(errno)}});
  }
  bound_ = true;
  return Status::Ok();
}

Status Server::Start() {
  BATON_RETURN_IF_ERROR(Bind());
  if (loop_) return Status::Ok();
  int cap = ConnectionsThatFit(std::max(1, options_.max_connections));
  loop_ =
      std::make_unique<EventLoop>(api_, *processor_, options_, max_body_bytes_, listen_fd_, cap);
  listen_fd_ = -1;  // the loop's now
  Status started = loop_->Start();
  if (!started.ok()) {
    loop_.reset();
    return started;
  }
  log::Info("the REST API is listening", {{"address", fmt::format("{}:{}", options_.host, port_)}});
  return Status::Ok();
}

void Server::Stop() {
  if (!bound_) return;
  api_.StopWaiting();
  if (loop_) loop_->Stop();
  loop_.reset();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
  processor_.reset();
  bound_ = false;
}

}  // namespace baton::api
