// One connection of the server (server.h), plain or TLS: reads requests with Beast's
// parser, hands each complete one to the handler pool, writes the answer, and holds a
// long poll or a stream while it waits. Internal to server.cc.
//
// Thread-safety: every member runs on the server's one I/O thread; the pool's threads
// and long polls reach a session only by posting to that thread (IoHandle).
#pragma once

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <string>
#include <unordered_map>

#include "http/handler_pool.h"
#include "http/server.h"

namespace baton::http::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

// The I/O thread's context, for threads that may outlive it: posts nothing once the
// server has stopped (Close).
class IoHandle {
 public:
  explicit IoHandle(asio::io_context& io) : io_(&io) {}
  void Post(std::function<void()> fn) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (io_ != nullptr) asio::post(*io_, std::move(fn));
  }
  void Close() BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    io_ = nullptr;
  }

 private:
  Mutex mu_;
  asio::io_context* io_ BATON_GUARDED_BY(mu_);
};

class SessionBase;

// What the sessions share with the server; touched on the I/O thread only.
struct Shared {
  const ServerOptions& options;
  std::size_t max_body_bytes;
  Handler& handler;
  HandlerPool& pool;
  std::shared_ptr<IoHandle> io;
  std::size_t buffered = 0;  // bytes of requests being read, over every session
  bool stopping = false;
  std::unordered_map<std::uint64_t, std::weak_ptr<SessionBase>> sessions;
  std::uint64_t next_id = 1;
  // sessions.size(), for Stop's thread to read.
  std::atomic<std::size_t> open{0};
};

class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  virtual void Start() = 0;
  // The server is stopping: closes unless a request is being handled or answered.
  virtual void OnStop() = 0;
  // Closes at once.
  virtual void Close() = 0;
};

// The bytes of `response` as sent: with its body unless `head_only`, closing after it
// when `close`.
std::string Serialize(const Response& response, bool head_only, bool close);
// The head of a stream's answer: no Content-Length, so its body runs to the close.
std::string StreamHead(const Response& response);
// The answer for a request Beast could not read (`error`), or nullopt to close silently.
std::optional<Response> RefusalFor(const boost::system::error_code& error,
                                   const bhttp::request_parser<bhttp::string_body>& parser,
                                   std::size_t max_body_bytes);
// The Request a handler gets from Beast's message.
Request ToRequest(bhttp::request<bhttp::string_body>& message, std::string remote_addr);

// Stream: tcp::socket, or asio::ssl::stream<tcp::socket>.
template <typename Stream>
class Session final : public SessionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  template <typename... StreamArgs>
  Session(Shared& shared, std::uint64_t id, StreamArgs&&... args)
      : shared_(shared),
        id_(id),
        stream_(std::forward<StreamArgs>(args)...),
        timer_(Socket().get_executor()) {}

  void Start() override;
  void OnStop() override;
  void Close() override;

 private:
  enum class State { kReading, kHandling, kParked, kStreaming, kWriting, kClosing, kClosed };
  using Callback = std::function<void(const boost::system::error_code&, std::size_t)>;

  tcp::socket& Socket() { return beast::get_lowest_layer(stream_); }
  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  // Runs `on_expiry` after `after` unless disarmed (or re-armed) first.
  void Arm(std::chrono::milliseconds after, std::function<void()> on_expiry);
  // Arms the deadline that cancels the pending reads and writes.
  void ArmDeadline(std::chrono::milliseconds after);
  void Disarm();

  void Handshake();
  void ReadRequest();
  void ReadHeader();
  void OnHeader();
  void ReadBody();
  void OnReadError(const boost::system::error_code& error);
  void Dispatch();
  void OnReply(Reply reply);
  void Park(std::shared_ptr<LongPoll> poll);
  void BeginStream(Reply reply);
  void WatchForHangUp();
  void OnPollReady();
  void Pump();
  void Write(std::string bytes, bool close);
  void CloseGracefully();
  void Account(std::size_t bytes);

  Shared& shared_;
  const std::uint64_t id_;
  Stream stream_;
  asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  State state_ = State::kReading;
  bool head_only_ = false;         // the request in hand is a HEAD
  bool keep_alive_ = true;         // the request in hand lets the connection stay open
  std::size_t counted_ = 0;        // this session's part of Shared::buffered
  std::string out_;                // being written
  std::string stream_out_;         // a stream's bytes waiting for the write in progress
  bool writing_ = false;           // a stream write is in progress
  bool stream_ended_ = false;      // the stream's poll ended: close once written
  bool watching_ = false;          // a read for the client's hang-up is pending
  std::array<char, 512> scratch_;  // what WatchForHangUp reads, dropped
  std::shared_ptr<LongPoll> poll_;
  std::string ping_;
  std::string remote_addr_;
};

}  // namespace baton::http::internal
