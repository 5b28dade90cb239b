// Webhook sending: the one HTTP POST of a delivery (WebhookSender; CurlWebhookSender is
// the real one, over http/client.h's libcurl client), and its signature (HMAC-SHA256
// through OpenSSL, which stays here). CurlWebhookSender connects only to addresses its
// AddressPolicy allows.
//
// Thread-safety: Post may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "webhook/address_policy.h"

namespace baton {

struct WebhookResponse {
  int status = 0;     // the HTTP status; 0 when there was none
  std::string error;  // why there was none (connection refused, timed out, ...)
  // The policy refused every address of the host: nothing was sent, and `error` says
  // "refused by policy: " and which rule.
  bool refused = false;
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
  // Connects only to the addresses `policy` allows (checked on the address each
  // connection is made to, after name resolution, on every attempt).
  explicit CurlWebhookSender(AddressPolicy policy = {});
  WebhookResponse Post(const std::string& url,
                       const std::vector<std::pair<std::string, std::string>>& headers,
                       const std::string& body, std::chrono::milliseconds timeout,
                       const std::function<bool()>& stopped) override;

 private:
  const AddressPolicy policy_;
};

// The lowercase hex HMAC-SHA256 of `message` under `key`.
std::string HmacSha256Hex(const std::string& key, const std::string& message);

// The X-Baton-Signature header of a call made at `timestamp` (Unix seconds) for delivery
// `id` (its X-Baton-Delivery header) with `body` as sent: "t=<timestamp>,v1=<hex>", the
// hex being HmacSha256Hex(key, "<timestamp>.<id>.<body>"), as Stripe and Standard
// Webhooks sign: the timestamp bounds a replay, the id lets a receiver refuse one.
std::string WebhookSignature(const std::string& key, std::int64_t timestamp, const std::string& id,
                             const std::string& body);

// The host of an http(s) URL, lowercase, without port or brackets; empty when `url` has
// none.
std::string UrlHost(const std::string& url);

}  // namespace baton
