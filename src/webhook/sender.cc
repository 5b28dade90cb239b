#include "webhook/sender.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace baton {
namespace {

std::size_t Discard(char*, std::size_t size, std::size_t n, void*) { return size * n; }

int Progress(void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* stopped = static_cast<const std::function<bool()>*>(data);
  return (*stopped && (*stopped)()) ? 1 : 0;
}

}  // namespace

CurlWebhookSender::CurlWebhookSender() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

WebhookResponse CurlWebhookSender::Post(
    const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& body, std::chrono::milliseconds timeout,
    const std::function<bool()>& stopped) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return {0, "libcurl could not start a request"};
  curl_slist* list = nullptr;
  for (const auto& [name, value] : headers) {
    list = curl_slist_append(list, (name + ": " + value).c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> owned(list, curl_slist_free_all);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, Progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &stopped);
  CURLcode code = curl_easy_perform(c);
  if (code == CURLE_ABORTED_BY_CALLBACK) return {0, "stopped"};
  if (code != CURLE_OK) return {0, curl_easy_strerror(code)};
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return {static_cast<int>(status), ""};
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

std::string UrlHost(const std::string& url) {
  std::size_t start = url.find("://");
  if (start == std::string::npos) return "";
  start += 3;
  std::size_t end = url.find_first_of("/?#", start);
  std::string authority = url.substr(start, end == std::string::npos ? end : end - start);
  if (std::size_t at = authority.rfind('@'); at != std::string::npos) {
    authority = authority.substr(at + 1);
  }
  std::string host;
  if (authority.starts_with("[")) {
    std::size_t close = authority.find(']');
    host = authority.substr(1, close == std::string::npos ? close : close - 1);
  } else {
    host = authority.substr(0, authority.find(':'));
  }
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return host;
}

}  // namespace baton
