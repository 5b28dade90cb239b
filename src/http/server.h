// Baton's HTTP/1.1 server, over Boost.Beast and Boost.Asio, plain or TLS; it knows
// nothing of the API (api/ gives it a Handler).
//
// A connection waiting for a request (new, or kept alive between requests) holds no
// thread: one I/O thread owns every connection and reads each request whole (its line
// and headers within kMaxHeaderBytes, then the body, up to `max_body_bytes`) before a
// bounded pool of handler threads runs it; the I/O thread writes the answer, so no
// client's pace holds a handler. An announced Content-Length over the limit is answered
// 413 from the headers, without reading the body. A request answered later (a long poll:
// LongPoll) holds no thread while it waits either.
//
// Limits: `max_connections` open connections (bounded by RLIMIT_NOFILE, whose soft limit
// Listen raises to the hard one); more are answered 503 at once and closed. At most
// `max_buffered_bytes` of requests being read at once; a request that would pass it is
// answered 503. An idle connection is closed after `keep_alive`; from a request's first
// byte, it must arrive whole within `request_timeout` (else 408 and close), and the
// client must take the response within `request_timeout` (else close).
//
// TLS (`tls_cert` and `tls_key` set): TLS 1.2 or later only; ReloadTls (and SIGHUP)
// reads the files again, for the connections that come next; open ones keep theirs. A
// plain HTTP request on the TLS port is answered 400 and closed.
//
// Thread-safety: Listen, Start and Stop from one thread; LongPoll and ReloadTls from any.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace baton::http {

// The most bytes a request's line and headers may take; more is answered 431.
inline constexpr std::size_t kMaxHeaderBytes = 64 << 10;

struct Request {
  std::string method;                        // as sent; a HEAD is handled as a GET (see `head`)
  bool head = false;                         // sent as HEAD: the answer goes without its body
  std::string path;                          // percent-decoded, without the query
  std::map<std::string, std::string> query;  // percent-decoded
  // Every header as sent, its name in lower case (a repeated one: its last value).
  std::map<std::string, std::string> headers;
  std::string body;
  std::string remote_addr;  // the client's address; empty when not known
};

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // Further headers (name, value), in order.
  std::vector<std::pair<std::string, std::string>> headers;
};

// A request answered later, from any thread: the one long-poll primitive. Either it is
// answered once (Answer: a parked submission, a task poll), or, made as a stream, its
// body goes out as it is given (Send) until End or the client leaves (server-sent
// events). While it waits its connection holds no thread.
//
// Thread-safety: every method may be called from any thread; the gone callback runs on
// the server's I/O thread, never under the poll's lock.
class LongPoll {
 public:
  LongPoll() = default;
  LongPoll(const LongPoll&) = delete;
  LongPoll& operator=(const LongPoll&) = delete;

  // The answer (the first one counts). For a stream, ends it instead.
  void Answer(Response response) BATON_EXCLUDES(mu_);
  // A stream's next bytes.
  void Send(std::string bytes) BATON_EXCLUDES(mu_);
  // Ends a stream (the connection closes once what was sent has gone).
  void End() BATON_EXCLUDES(mu_);
  // Whether its client went away or the server stopped: nothing sent goes anywhere.
  bool gone() const BATON_EXCLUDES(mu_);
  // Called once when the poll is gone (at once if it already is).
  void OnGone(std::function<void()> gone) BATON_EXCLUDES(mu_);

  // --- The server's side.
  struct Taken {
    std::optional<Response> answer;
    std::string bytes;
    bool ended = false;
  };
  // Called, outside the lock, whenever there is something to Take.
  void Attach(std::function<void()> ready) BATON_EXCLUDES(mu_);
  Taken Take() BATON_EXCLUDES(mu_);
  // The connection went: wakes no one any more and calls the gone callback.
  void Detach() BATON_EXCLUDES(mu_);

 private:
  void Notify() BATON_EXCLUDES(mu_);

  mutable Mutex mu_;
  std::optional<Response> answer_ BATON_GUARDED_BY(mu_);
  std::string bytes_ BATON_GUARDED_BY(mu_);
  bool ended_ BATON_GUARDED_BY(mu_) = false;
  bool gone_ BATON_GUARDED_BY(mu_) = false;
  std::function<void()> ready_ BATON_GUARDED_BY(mu_);
  std::function<void()> on_gone_ BATON_GUARDED_BY(mu_);
};

// What a handler gives back: a response now, or a long poll that answers later. With
// `stream`, `response` is the head and first bytes of a body that runs until the
// connection closes, and the poll's Sends follow it; `ping` is sent when the stream has
// been quiet for a while (it keeps proxies from closing it, and finds clients gone).
struct Reply {
  Response response;
  std::shared_ptr<LongPoll> later;
  bool stream = false;
  std::string ping;
};

// Runs on a handler thread; may block (bounded: the datastore, never the client).
using Handler = std::function<Reply(Request&)>;

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
  // PEM files of the certificate (its chain after it) and its private key: both set,
  // the server speaks HTTPS only.
  std::string tls_cert;
  std::string tls_key;
};

// Splits "HOST:PORT" (":PORT" means localhost).
Result<std::pair<std::string, int>> ParseAddress(std::string_view address);

// The JSON error body every answer the server gives itself carries (as the API's do).
Response ErrorResponse(int status, std::string_view code, const std::string& message);

class Server {
 public:
  Server(Handler handler, ServerOptions options, std::size_t max_body_bytes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Takes the address, without serving yet. Fails, saying why, when the address is taken
  // on any of the addresses the host resolves to ("cannot listen on HOST:PORT: address
  // already in use"), or is not an address of this machine, or the TLS files do not load.
  Status Listen();
  // Starts the I/O thread and the handlers; serves the address if Listen took one.
  Status Start();
  // Stops accepting, closes idle connections, connections whose request has not arrived
  // whole and streams, finishes the requests in progress and the answers of long polls
  // answered meanwhile (bounded by request_timeout, at most 3 s), and returns.
  void Stop();
  int port() const { return port_; }

  // Reads the TLS files again for the connections to come; the open ones keep theirs.
  // On failure the old certificate stays, and the error says why.
  Status ReloadTls();

  // Serves `input` as all that a client sent on one connection before closing its side,
  // over a socket pair, and returns what the server sent back (the fuzzer's harness).
  // Start must have been called.
  std::string ServeBytes(std::string_view input);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace baton::http
