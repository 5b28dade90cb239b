#include "webhook/sender.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <limits>

#include "http/client.h"

namespace baton {

CurlWebhookSender::CurlWebhookSender(AddressPolicy policy) : policy_(std::move(policy)) {}

WebhookResponse CurlWebhookSender::Post(
    const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& body, std::chrono::milliseconds timeout,
    const std::function<bool()>& stopped) {
  http::ClientRequest request;
  request.method = "POST";
  request.url = url;
  request.headers = headers;
  request.body = body;
  request.timeout = timeout;
  request.connect_timeout = timeout;
  request.stopped = stopped;
  // Only the status counts: the receiver's body is dropped as it comes, however long
  // (the timeout bounds it).
  request.max_response_bytes = std::numeric_limits<std::size_t>::max();
  request.on_body = [](std::string_view) { return true; };
  request.refuse_address = [this](std::span<const std::uint8_t> address) -> std::string {
    std::string rule = policy_.Refusal(address);
    if (rule.empty()) return "";
    return fmt::format(
        "the address is {} (allowed only by webhooks.allow_private or webhooks.allowed_networks)",
        rule);
  };
  auto response = http::Client().Send(request);
  if (!response.ok()) {
    const std::string& error = response.status().message();
    return {0, error, error.starts_with("refused by policy: ")};
  }
  return {response->status, ""};
}

std::string HmacSha256Hex(const std::string& key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 0xf];
  }
  return out;
}

std::string WebhookSignature(const std::string& key, std::int64_t timestamp, const std::string& id,
                             const std::string& body) {
  const std::string t = std::to_string(timestamp);
  return "t=" + t + ",v1=" + HmacSha256Hex(key, t + "." + id + "." + body);
}

std::string UrlHost(const std::string& url) { return http::UrlHost(url); }

}  // namespace baton
