#include "webhook/sender.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <limits>

#include "http/client.h"

namespace baton {

CurlWebhookSender::CurlWebhookSender() = default;

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
  auto response = http::Client().Send(request);
  if (!response.ok()) return {0, response.status().message()};
  return {response->status, ""};
}

std::string WebhookSignature(const std::string& key, const std::string& body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256=";
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 0xf];
  }
  return out;
}

std::string UrlHost(const std::string& url) { return http::UrlHost(url); }

}  // namespace baton
