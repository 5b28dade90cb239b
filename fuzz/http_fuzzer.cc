// Fuzzes the HTTP request path: any bytes, as one connection's input, go through the
// Beast server's connection code (http/server.h, over a socket pair: HttpProtocol) to
// Api::Handle, over an in-memory datastore, broker and coordinator. Whatever the bytes, the server
// must not crash, leak or hang, and what it sends must be a sequence of well-formed HTTP/1.1
// responses: a status line, CRLF-ended headers, and a body of exactly its Content-Length (none for
// 100 Continue); an event stream (GET /events) has none, and is the last response: its body runs to
// the end.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "api/api.h"
#include "api/server.h"
#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/coordinator.h"
#include "datastore/sqlite/sqlite_datastore.h"

namespace {

struct World {
  World() {
    auto opened = baton::SqliteDatastore::Open(baton::SqliteOptions{.path = ":memory:"});
    if (!opened.ok()) __builtin_trap();
    datastore = std::move(*opened);
    timers = baton::NewThreadTimers();
    coordinator = std::make_unique<baton::Coordinator>(*datastore, broker, clock, *timers);
    if (!coordinator->Start({}).ok()) __builtin_trap();
    api = std::make_unique<baton::api::Api>(*coordinator, *datastore, broker,
                                            baton::api::ApiOptions{.version = "fuzz"});
    protocol = std::make_unique<baton::api::HttpProtocol>(*api, 4 << 20);
  }
  baton::SystemClock clock;
  std::unique_ptr<baton::Timers> timers;
  baton::InMemoryBroker broker;
  std::unique_ptr<baton::Datastore> datastore;
  std::unique_ptr<baton::Coordinator> coordinator;
  std::unique_ptr<baton::api::Api> api;
  std::unique_ptr<baton::api::HttpProtocol> protocol;
};

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

// Consumes one response from `out`; false when it is not well-formed.
bool TakeResponse(std::string_view& out) {
  if (!out.starts_with("HTTP/1.1 ") || out.size() < 13) return false;
  int status = 0;
  auto [ptr, ec] = std::from_chars(out.data() + 9, out.data() + 12, status);
  if (ec != std::errc() || ptr != out.data() + 12 || status < 100 || status > 599 ||
      out[12] != ' ') {
    return false;
  }
  std::size_t end = out.find("\r\n\r\n");
  if (end == std::string_view::npos) return false;
  std::string_view head = out.substr(0, end + 2);
  out.remove_prefix(end + 4);
  if (status == 100) return head.find("\r\n") == head.size() - 2;
  std::optional<std::size_t> length;
  for (std::size_t pos = head.find("\r\n") + 2; pos < head.size();) {
    std::size_t nl = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, nl - pos);
    pos = nl + 2;
    if (line.find(':') == std::string_view::npos || line.find('\n') != std::string_view::npos) {
      return false;
    }
    if (StartsWithIgnoreCase(line, "content-type: text/event-stream")) {
      if (head.find("\r\nContent-Length:") != std::string_view::npos) return false;
      out = {};
      return true;
    }
    if (StartsWithIgnoreCase(line, "content-length:")) {
      std::string_view v = line.substr(15);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      std::size_t n = 0;
      auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (e != std::errc() || p != v.data() + v.size()) return false;
      length = n;
    }
  }
  if (!length) return false;
  // The answer to a HEAD has the headers of a GET and no body: nothing follows, or the
  // next response does (the API's bodies are JSON, which never starts so).
  if (*length > 0 && (out.empty() || out.starts_with("HTTP/1.1 "))) return true;
  if (out.size() < *length) return false;
  out.remove_prefix(*length);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* world = new World();  // lives for the process, as the server does
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string sent = world->protocol->ServeBytes(input);
  std::string_view out = sent;
  while (!out.empty()) {
    if (!TakeResponse(out)) __builtin_trap();
  }
  return 0;
}
