#include "http/session.h"

#include <fmt/format.h>

#include "base/url.h"

namespace baton::http::internal {
namespace {

using boost::system::error_code;

// A stream whose client takes less than it is sent is closed past this.
constexpr std::size_t kMaxStreamBacklog = 8 << 20;
constexpr auto kPingEvery = std::chrono::seconds(15);
// After the last response, how long a closing connection may take to be read to its end.
constexpr auto kLinger = std::chrono::seconds(1);
// The first byte of a TLS handshake record; anything else on the TLS port is not TLS.
constexpr unsigned char kTlsHandshake = 0x16;
// The first read of a request: small, since an idle connection holds its buffer (2,000
// idle ones, 2,000 buffers); Beast grows it for a larger request.
constexpr std::size_t kFirstRead = 2048;

std::string_view Reason(int status) {
  std::string_view reason =
      bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  return reason.empty() ? "Unknown" : reason;
}

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// The query's name=value pairs, each percent-decoded ('+' is a space), as httplib did.
std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> params;
  while (!query.empty()) {
    std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    if (pair.empty()) continue;
    std::size_t eq = pair.find('=');
    std::string name(pair.substr(0, eq));
    std::string value(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    std::replace(name.begin(), name.end(), '+', ' ');
    std::replace(value.begin(), value.end(), '+', ' ');
    params.emplace(PercentDecode(name), PercentDecode(value));
  }
  return params;
}

}  // namespace

std::string Serialize(const Response& response, bool head_only, bool close) {
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", response.status,
                  Reason(response.status), response.content_type, response.body.size());
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  out += close ? "Connection: close\r\n\r\n" : "\r\n";
  if (!head_only) out += response.body;
  return out;
}

std::string StreamHead(const Response& response) {
  std::string head = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n", response.status,
                                 Reason(response.status), response.content_type);
  for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
  head += "Connection: close\r\nX-Accel-Buffering: no\r\n\r\n";
  return head + response.body;
}

std::optional<Response> RefusalFor(const error_code& error,
                                   const bhttp::request_parser<bhttp::string_body>& parser,
                                   std::size_t max_body_bytes) {
  if (error == bhttp::error::header_limit) {
    return ErrorResponse(
        431, "INVALID_ARGUMENT",
        fmt::format("the request line and headers are over {} bytes", kMaxHeaderBytes));
  }
  if (error == bhttp::error::body_limit) {
    // The header may not be done (the limit stops it), so the field is read as sent.
    std::string_view length = parser.get()[bhttp::field::content_length];
    return ErrorResponse(
        413, "INVALID_ARGUMENT",
        !length.empty()
            ? fmt::format("the request body is {} bytes (Content-Length); the limit is {}",
                          length.substr(0, 20), max_body_bytes)
            : fmt::format("the request body is over {} bytes, the limit", max_body_bytes));
  }
  if (error == bhttp::error::bad_transfer_encoding) {
    return ErrorResponse(
        501, "INVALID_ARGUMENT",
        "this Transfer-Encoding is not supported: send Content-Length, or chunked");
  }
  // The client ended mid-request, or the connection broke: no one to answer.
  if (error == bhttp::error::end_of_stream || error == bhttp::error::partial_message ||
      error.category() != bhttp::make_error_code(bhttp::error::bad_target).category()) {
    return std::nullopt;
  }
  return ErrorResponse(400, "INVALID_ARGUMENT",
                       fmt::format("malformed HTTP request: {}", error.message()));
}

Request ToRequest(bhttp::request<bhttp::string_body>& message, std::string remote_addr) {
  Request request;
  request.head = message.method() == bhttp::verb::head;
  request.method = request.head ? "GET" : std::string(message.method_string());
  std::string_view target = message.target();
  std::size_t question = target.find('?');
  request.path = PercentDecode(target.substr(0, question));
  if (question != std::string_view::npos) request.query = ParseQuery(target.substr(question + 1));
  for (const auto& field : message) {
    request.headers[Lower(field.name_string())] = std::string(field.value());
  }
  request.body = std::move(message.body());
  request.remote_addr = std::move(remote_addr);
  return request;
}

template <typename Stream>
void Session<Stream>::Start() {
  error_code ec;
  Socket().set_option(tcp::no_delay(true), ec);  // a socket pair has no such option
  auto endpoint = Socket().remote_endpoint(ec);
  if (!ec) remote_addr_ = endpoint.address().to_string();
  if constexpr (kTls) {
    Handshake();
  } else {
    ReadRequest();
  }
}

template <typename Stream>
void Session<Stream>::Arm(std::chrono::milliseconds after, std::function<void()> on_expiry) {
  std::uint64_t generation = ++timer_generation_;
  timed_out_ = false;
  timer_.expires_after(after);
  timer_.async_wait([self = Self(), generation, on_expiry = std::move(on_expiry)](error_code ec) {
    if (ec || generation != self->timer_generation_ || self->state_ == State::kClosed) return;
    on_expiry();
  });
}

template <typename Stream>
void Session<Stream>::ArmDeadline(std::chrono::milliseconds after) {
  Arm(after, [this] {
    timed_out_ = true;
    error_code ec;
    Socket().cancel(ec);
  });
}

template <typename Stream>
void Session<Stream>::Disarm() {
  ++timer_generation_;
  timer_.cancel();
}

// TLS: the first bytes decide. A TLS client's handshake record begins 0x16; a plain HTTP
// request on this port gets a plain 400 (a client that sent HTTP reads HTTP) and the close.
template <typename Stream>
void Session<Stream>::Handshake() {
  if constexpr (kTls) {
    ArmDeadline(shared_.options.keep_alive);
    Socket().async_read_some(buffer_.prepare(4096), [self = Self()](error_code ec, std::size_t n) {
      self->buffer_.commit(n);
      if (ec || self->state_ == State::kClosed) return self->Close();
      auto first = static_cast<const unsigned char*>(self->buffer_.data().data())[0];
      if (first != kTlsHandshake) {
        self->out_ = Serialize(
            ErrorResponse(400, "INVALID_ARGUMENT", "this port speaks HTTPS: use https://"), false,
            true);
        self->state_ = State::kClosing;
        asio::async_write(self->Socket(), asio::buffer(self->out_),
                          [self](error_code, std::size_t) { self->Close(); });
        return;
      }
      self->ArmDeadline(self->shared_.options.request_timeout);
      self->stream_.async_handshake(asio::ssl::stream_base::server, self->buffer_.data(),
                                    [self](error_code ec2, std::size_t used) {
                                      self->buffer_.consume(used);
                                      if (ec2 || self->state_ == State::kClosed)
                                        return self->Close();
                                      self->Disarm();
                                      self->ReadRequest();
                                    });
    });
  }
}

template <typename Stream>
void Session<Stream>::ReadRequest() {
  if (shared_.stopping) return CloseGracefully();
  state_ = State::kReading;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
  parser_->body_limit(shared_.max_body_bytes);
  if (buffer_.size() > 0) {  // a pipelined request has begun
    ArmDeadline(shared_.options.request_timeout);
    return ReadHeader();
  }
  // Idle until the first byte (keep_alive), then the whole request (request_timeout).
  ArmDeadline(shared_.options.keep_alive);
  stream_.async_read_some(buffer_.prepare(kFirstRead),
                          [self = Self()](error_code ec, std::size_t n) {
                            self->buffer_.commit(n);
                            if (self->state_ == State::kClosed) return;
                            if (ec) return self->Close();
                            self->ArmDeadline(self->shared_.options.request_timeout);
                            self->ReadHeader();
                          });
}

template <typename Stream>
void Session<Stream>::ReadHeader() {
  bhttp::async_read_header(stream_, buffer_, *parser_, [self = Self()](error_code ec, std::size_t) {
    if (self->state_ == State::kClosed) return;
    if (ec) return self->OnReadError(ec);
    self->OnHeader();
  });
}

template <typename Stream>
void Session<Stream>::OnHeader() {
  std::size_t bytes = buffer_.size() + parser_->content_length().value_or(0);
  if (shared_.buffered + bytes > shared_.options.max_buffered_bytes) {
    Disarm();
    keep_alive_ = false;
    return Write(Serialize(ErrorResponse(503, "UNAVAILABLE",
                                         fmt::format("the server is buffering over {} bytes of "
                                                     "requests, its limit "
                                                     "(api.max_buffered_bytes): try again later",
                                                     shared_.options.max_buffered_bytes)),
                           false, true),
                 true);
  }
  Account(bytes);
  const auto& header = parser_->get();
  if (!parser_->is_done() &&
      bhttp::token_list(header[bhttp::field::expect]).exists("100-continue")) {
    out_ = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(out_), [self = Self()](error_code ec, std::size_t) {
      if (self->state_ == State::kClosed) return;
      if (ec) return self->OnReadError(ec);
      self->ReadBody();
    });
    return;
  }
  ReadBody();
}

template <typename Stream>
void Session<Stream>::ReadBody() {
  if (parser_->is_done()) return Dispatch();
  bhttp::async_read(stream_, buffer_, *parser_, [self = Self()](error_code ec, std::size_t) {
    if (self->state_ == State::kClosed) return;
    if (ec) return self->OnReadError(ec);
    self->Dispatch();
  });
}

template <typename Stream>
void Session<Stream>::OnReadError(const error_code& error) {
  keep_alive_ = false;
  if (timed_out_) {
    return Write(Serialize(ErrorResponse(408, "DEADLINE_EXCEEDED",
                                         fmt::format("the request did not arrive whole within "
                                                     "{} ms (api.request_timeout)",
                                                     shared_.options.request_timeout.count())),
                           false, true),
                 true);
  }
  Disarm();
  std::optional<Response> refusal = RefusalFor(error, *parser_, shared_.max_body_bytes);
  if (!refusal) return Close();
  Write(Serialize(*refusal, false, true), true);
}

template <typename Stream>
void Session<Stream>::Dispatch() {
  Disarm();
  Account(0);
  auto message = parser_->release();
  parser_.reset();
  keep_alive_ = message.keep_alive();
  head_only_ = message.method() == bhttp::verb::head;
  bool read = message.method() == bhttp::verb::get || head_only_;
  state_ = State::kHandling;
  auto request = std::make_shared<Request>(ToRequest(message, remote_addr_));
  shared_.pool.Submit(read, [self = Self(), request, &shared = shared_] {
    Reply reply = shared.handler(*request);
    shared.io->Post(
        [self, reply = std::move(reply)]() mutable { self->OnReply(std::move(reply)); });
  });
}

template <typename Stream>
void Session<Stream>::OnReply(Reply reply) {
  if (state_ == State::kClosed) {
    if (reply.later) reply.later->Detach();
    return;
  }
  if (reply.later && reply.stream) return BeginStream(std::move(reply));
  if (reply.later) return Park(std::move(reply.later));
  bool close = !keep_alive_ || shared_.stopping;
  Write(Serialize(reply.response, head_only_, close), close);
}

// A long poll: the connection waits, holding no thread, for the poll's answer.
template <typename Stream>
void Session<Stream>::Park(std::shared_ptr<LongPoll> poll) {
  state_ = State::kParked;
  poll_ = std::move(poll);
  std::weak_ptr<Session> weak = Self();
  poll_->Attach([weak, io = shared_.io] {
    io->Post([weak] {
      if (auto self = weak.lock()) self->OnPollReady();
    });
  });
  WatchForHangUp();
}

template <typename Stream>
void Session<Stream>::BeginStream(Reply reply) {
  state_ = State::kStreaming;
  ping_ = std::move(reply.ping);
  stream_out_ = StreamHead(reply.response);
  if (shared_.stopping) stream_ended_ = true;
  Park(std::move(reply.later));
  state_ = State::kStreaming;
  Pump();
}

// A waiting client sends nothing more; a read that ends is the client gone (its poll
// ends). Bytes it does send are dropped: the connection closes after the answer. The same
// read drains a closing connection.
template <typename Stream>
void Session<Stream>::WatchForHangUp() {
  if (watching_) return;
  watching_ = true;
  stream_.async_read_some(asio::buffer(scratch_), [self = Self()](error_code ec, std::size_t) {
    self->watching_ = false;
    if (self->state_ == State::kClosed) return;
    if (ec) return self->Close();
    if (self->state_ == State::kParked || self->state_ == State::kStreaming ||
        self->state_ == State::kClosing) {
      self->WatchForHangUp();
    }
  });
}

template <typename Stream>
void Session<Stream>::OnPollReady() {
  if (poll_ == nullptr) return;
  LongPoll::Taken taken = poll_->Take();
  if (state_ == State::kParked && taken.answer) {
    poll_->Detach();
    poll_.reset();
    return Write(Serialize(*taken.answer, head_only_, true), true);
  }
  if (state_ != State::kStreaming) return;
  stream_out_ += taken.bytes;
  stream_ended_ = stream_ended_ || taken.ended || taken.answer.has_value();
  Pump();
}

// Writes what the stream has pending, one write at a time; pings it when quiet.
template <typename Stream>
void Session<Stream>::Pump() {
  if (writing_) {
    if (stream_out_.size() > kMaxStreamBacklog) Close();
    return;
  }
  if (stream_out_.empty()) {
    if (stream_ended_) return Close();
    return Arm(kPingEvery, [this] {
      stream_out_ += ping_;
      Pump();
    });
  }
  writing_ = true;
  out_ = std::move(stream_out_);
  stream_out_.clear();
  asio::async_write(stream_, asio::buffer(out_), [self = Self()](error_code ec, std::size_t) {
    self->writing_ = false;
    if (self->state_ == State::kClosed) return;
    if (ec) return self->Close();
    self->Pump();
  });
}

template <typename Stream>
void Session<Stream>::Write(std::string bytes, bool close) {
  state_ = State::kWriting;
  out_ = std::move(bytes);
  ArmDeadline(shared_.options.request_timeout);
  asio::async_write(stream_, asio::buffer(out_),
                    [self = Self(), close](error_code ec, std::size_t) {
                      if (self->state_ == State::kClosed) return;
                      if (ec) return self->Close();
                      self->Disarm();
                      self->out_.clear();
                      self->out_.shrink_to_fit();
                      if (close || self->shared_.stopping) return self->CloseGracefully();
                      self->ReadRequest();
                    });
}

// Closing with unread bytes would reset the connection before the client reads the
// answer: half-close (TLS: close_notify, unless a read is pending, which TLS cannot have
// beside a shutdown), then drop what the client still sends until it closes, for at most
// kLinger.
template <typename Stream>
void Session<Stream>::CloseGracefully() {
  state_ = State::kClosing;
  Account(0);
  Arm(std::chrono::duration_cast<std::chrono::milliseconds>(kLinger), [this] { Close(); });
  if constexpr (kTls) {
    if (!watching_) {
      stream_.async_shutdown([self = Self()](error_code) { self->Close(); });
      return;
    }
  }
  error_code ec;
  Socket().shutdown(tcp::socket::shutdown_send, ec);
  if constexpr (!kTls) WatchForHangUp();
}

template <typename Stream>
void Session<Stream>::OnStop() {
  switch (state_) {
    case State::kReading:
    case State::kStreaming:
    case State::kClosing:
      Close();
      return;
    case State::kParked:  // answered by the poll's owner (503), or closed at the end
    case State::kHandling:
    case State::kWriting:
    case State::kClosed:
      return;
  }
}

template <typename Stream>
void Session<Stream>::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  Disarm();
  Account(0);
  if (poll_ != nullptr) poll_->Detach();
  poll_.reset();
  error_code ec;
  Socket().close(ec);
  shared_.sessions.erase(id_);
  shared_.open = shared_.sessions.size();
}

template <typename Stream>
void Session<Stream>::Account(std::size_t bytes) {
  shared_.buffered -= counted_;
  counted_ = bytes;
  shared_.buffered += counted_;
}

template class Session<tcp::socket>;
template class Session<asio::ssl::stream<tcp::socket>>;

}  // namespace baton::http::internal
