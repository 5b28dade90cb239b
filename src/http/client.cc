#include "http/client.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace baton::http {
namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return text;
}

// What one transfer collects while libcurl runs it.
struct Transfer {
  const ClientRequest& request;
  ClientResponse response;
  std::size_t received = 0;
  bool too_large = false;
  bool refused_by_reader = false;
  std::string refused;  // why refuse_address refused the last address it refused
  int connections = 0;  // sockets opened (addresses not refused)
};

std::size_t OnBody(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t bytes = size * n;
  t->received += bytes;
  if (t->received > t->request.max_response_bytes) {
    t->too_large = true;
    return 0;  // fails the transfer with CURLE_WRITE_ERROR
  }
  if (t->request.on_body) {
    if (!t->request.on_body(std::string_view(data, bytes))) {
      t->refused_by_reader = true;
      return 0;
    }
  } else {
    t->response.body.append(data, bytes);
  }
  return bytes;
}

std::size_t OnHeader(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  // A new status line (after a 100 Continue, say) starts the headers afresh.
  if (line.starts_with("HTTP/")) t->response.headers.clear();
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ' ||
                              value.back() == '\t')) {
      value.remove_suffix(1);
    }
    t->response.headers.emplace_back(Lower(std::string(line.substr(0, colon))), std::string(value));
  }
  return size * n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* t = static_cast<const Transfer*>(user);
  return t->request.stopped && t->request.stopped() ? 1 : 0;
}

// Opens the socket of each connection, after asking refuse_address about its address.
curl_socket_t OnOpenSocket(void* user, curlsocktype purpose, curl_sockaddr* address) {
  auto* t = static_cast<Transfer*>(user);
  if (purpose == CURLSOCKTYPE_IPCXN && t->request.refuse_address) {
    std::span<const std::uint8_t> bytes;
    if (address->family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&address->addr);
      bytes = {reinterpret_cast<const std::uint8_t*>(&in->sin_addr), 4};
    } else if (address->family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address->addr);
      bytes = {reinterpret_cast<const std::uint8_t*>(&in6->sin6_addr), 16};
    }
    std::string why = bytes.empty() ? "not an IP address" : t->request.refuse_address(bytes);
    if (!why.empty()) {
      t->refused = std::move(why);
      return CURL_SOCKET_BAD;
    }
  }
  ++t->connections;
  return socket(address->family, address->socktype, address->protocol);
}

// Has `t.request.refuse_address` asked about each address before it is connected to; no
// proxy, whose address would be the one asked about.
void CheckAddresses(CURL* c, Transfer& t) {
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &t);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
}

// The transport error as a Status whose message a person can act on.
Status ErrorOf(CURLcode code, const char* detail, const Transfer& t) {
  std::string why = *detail != '\0' ? detail : curl_easy_strerror(code);
  // Nothing was connected to: the same answer whatever listens at the refused address.
  if (!t.refused.empty() && t.connections == 0) {
    return FailedPrecondition("refused by policy: " + t.refused);
  }
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return InvalidArgument("bad URL: " + why);
    case CURLE_COULDNT_RESOLVE_HOST:
      return Unavailable("unknown host: " + why);
    case CURLE_COULDNT_CONNECT:
      return Unavailable("connection refused");
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceeded("timed out: " + why);
    case CURLE_ABORTED_BY_CALLBACK:
      return Cancelled("stopped");
    case CURLE_WRITE_ERROR:
      if (t.too_large) {
        return FailedPrecondition("the response is larger than " +
                                  std::to_string(t.request.max_response_bytes) + " bytes");
      }
      if (t.refused_by_reader) return Cancelled("stopped");
      return Unavailable(why);
    case CURLE_PEER_FAILED_VERIFICATION:
      return Unavailable("TLS: the server's certificate is not trusted (" + why + ")");
    case CURLE_SSL_CACERT_BADFILE:
      return Unavailable("TLS: cannot use the CA file " + t.request.ca_file + " (" + why + ")");
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
      return Unavailable("TLS: " + why);
    default:
      return Unavailable(why);
  }
}

using Easy = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;
using List = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

}  // namespace

std::optional<std::string> ClientResponse::Header(std::string_view name) const {
  std::string wanted = Lower(std::string(name));
  for (const auto& [key, value] : headers) {
    if (key == wanted) return value;
  }
  return std::nullopt;
}

Client::Client() {
  // Not thread-safe in libcurl itself, hence once, before any handle exists.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

Result<ClientResponse> Client::Send(const ClientRequest& request) const {
  Easy easy(curl_easy_init(), curl_easy_cleanup);
  if (!easy) return Internal("libcurl could not start a request");
  CURL* c = easy.get();
  List list(nullptr, curl_slist_free_all);
  auto add = [&list](const std::string& line) {
    curl_slist* grown = curl_slist_append(list.get(), line.c_str());
    if (grown != nullptr) {
      (void)list.release();
      list.reset(grown);
    }
  };
  for (const auto& [name, value] : request.headers) add(name + ": " + value);
  // No "Expect: 100-continue" round trip before larger bodies: the servers we talk to
  // read the body anyway, and some never answer the 100.
  add("Expect:");

  Transfer t{request, {}, 0, false, false, {}, 0};
  char detail[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    // POSTFIELDS makes libcurl send the body with its length, for every method.
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    if (request.method != "POST") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list.get());
  if (!request.user.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(c, CURLOPT_USERNAME, request.user.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, request.password.c_str());
  }
  if (!request.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, request.ca_file.c_str());
    curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
  }
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  if (request.refuse_address) CheckAddresses(c, t);
  if (request.stopped) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  }
  CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) return ErrorOf(code, detail, t);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  t.response.status = static_cast<int>(status);
  return std::move(t.response);
}

std::string UrlHost(std::string_view url) {
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> parsed(curl_url(), curl_url_cleanup);
  if (!parsed ||
      curl_url_set(parsed.get(), CURLUPART_URL, std::string(url).c_str(), 0) != CURLUE_OK) {
    return "";
  }
  char* part = nullptr;
  if (curl_url_get(parsed.get(), CURLUPART_HOST, &part, 0) != CURLUE_OK) return "";
  std::string host(part);
  curl_free(part);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return Lower(std::move(host));
}

}  // namespace baton::http
