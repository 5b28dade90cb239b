// Webhook sending: the one HTTP POST of a delivery (WebhookSender; CurlWebhookSender is
// the real one, over http/client.h's libcurl client), and its signature (HMAC-SHA256
// through OpenSSL, which stays here).
//
// Thread-safety: Post may be called from several threads at once.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace baton {

struct WebhookResponse {
  int status = 0;     // the HTTP status; 0 when there was none
  std::string error;  // why there was none (connection refused, timed out, ...)
};

class WebhookSender {
 public:
  virtual ~WebhookSender() = default;
  // POSTs `body` to `url` with `headers`, within `timeout`; returns early (status 0,
  // error "stopped") once `stopped` returns true. Never follows redirects.
  virtual WebhookResponse Post(const std::string& url,
                               const std::vector<std::pair<std::string, std::string>>& headers,
                               const std::string& body, std::chrono::milliseconds timeout,
                               const std::function<bool()>& stopped) = 0;
};

class CurlWebhookSender final : public WebhookSender {
 public:
  CurlWebhookSender();
  WebhookResponse Post(const std::string& url,
                       const std::vector<std::pair<std::string, std::string>>& headers,
                       const std::string& body, std::chrono::milliseconds timeout,
                       const std::function<bool()>& stopped) override;
};

// "sha256=" and the lowercase hex HMAC-SHA256 of `body` under `key`: the value of the
// X-Baton-Signature header, which a receiver recomputes with the key to verify a call.
std::string WebhookSignature(const std::string& key, const std::string& body);

// The host of an http(s) URL, lowercase, without port or brackets; empty when `url` has
// none.
std::string UrlHost(const std::string& url);

}  // namespace baton
