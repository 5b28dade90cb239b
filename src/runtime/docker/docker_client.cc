#include "runtime/docker/docker_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

namespace baton {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct EasyDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct MultiDeleter {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

struct WriteTarget {
  const std::function<void(std::string_view)>* on_data;
};

size_t OnWrite(char* data, size_t size, size_t count, void* user) {
  auto* target = static_cast<WriteTarget*>(user);
  (*target->on_data)(std::string_view(data, size * count));
  return size * count;
}

}  // namespace

DockerClient::DockerClient(std::string host, std::string api_version) : host_(std::move(host)) {
  GlobalInit();
  constexpr std::string_view kUnix = "unix://";
  constexpr std::string_view kTcp = "tcp://";
  if (host_.starts_with(kUnix)) {
    socket_path_ = host_.substr(kUnix.size());
    base_url_ = "http://docker/" + api_version;
  } else if (host_.starts_with(kTcp)) {
    base_url_ = "http://" + host_.substr(kTcp.size()) + "/" + api_version;
  } else if (host_.starts_with("/")) {
    socket_path_ = host_;
    base_url_ = "http://docker/" + api_version;
  } else {
    base_url_ = host_ + "/" + api_version;  // http://…, for completeness
  }
}

Result<long> DockerClient::Stream(std::string_view method, const std::string& path,
                                  const std::string& body,
                                  const std::function<void(std::string_view)>& on_data,
                                  const std::function<bool()>& keep_going,
                                  Clock::time_point deadline,
                                  const std::vector<std::string>& headers) const {
  std::unique_ptr<CURL, EasyDeleter> curl(curl_easy_init());
  std::unique_ptr<CURLM, MultiDeleter> multi(curl_multi_init());
  if (!curl || !multi) return Internal("cannot initialise libcurl");
  std::string url = base_url_ + path;
  std::string method_text(method);
  char error[CURL_ERROR_SIZE] = {};
  WriteTarget target{&on_data};
  curl_slist* list = nullptr;
  for (const std::string& header : headers) list = curl_slist_append(list, header.c_str());
  if (method == "POST" || method == "PUT") {
    list = curl_slist_append(list, "Content-Type: application/json");
  }
  std::unique_ptr<curl_slist, SlistDeleter> header_list(list);

  CURL* easy = curl.get();
  if (!socket_path_.empty()) curl_easy_setopt(easy, CURLOPT_UNIX_SOCKET_PATH, socket_path_.c_str());
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &target);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  if (method == "POST" || method == "PUT") {
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    if (method == "PUT") curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, "PUT");
  } else if (method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method_text.c_str());
  }

  curl_multi_add_handle(multi.get(), easy);
  Status outcome = Status::Ok();
  bool done = false;
  CURLcode result = CURLE_OK;
  while (!done) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(multi.get(), &running);
    if (mc != CURLM_OK) {
      outcome = Internal(std::string("libcurl: ") + curl_multi_strerror(mc));
      break;
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        done = true;
        result = msg->data.result;
      }
    }
    if (done) break;
    if (!keep_going()) {
      outcome = Cancelled("request ended early");
      break;
    }
    auto now = Clock::now();
    if (now >= deadline) {
      outcome = DeadlineExceeded(method_text + " " + path + ": no answer in time");
      break;
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    int wait_ms = static_cast<int>(std::clamp<long long>(wait, 1, 50));
    curl_multi_poll(multi.get(), nullptr, 0, wait_ms, nullptr);
  }
  curl_multi_remove_handle(multi.get(), easy);
  if (!outcome.ok()) return outcome;
  if (result != CURLE_OK) {
    std::string why = error[0] != '\0' ? std::string(error) : curl_easy_strerror(result);
    return Unavailable("Docker API at " + host_ + ": " + method_text + " " + path + ": " + why);
  }
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

Result<HttpResponse> DockerClient::Call(std::string_view method, const std::string& path,
                                        const std::string& body, std::chrono::milliseconds timeout,
                                        const std::vector<std::string>& headers) const {
  HttpResponse response;
  std::function<void(std::string_view)> collect = [&response](std::string_view chunk) {
    response.body.append(chunk);
  };
  Result<long> status = Stream(
      method, path, body, collect, [] { return true; }, Clock::now() + timeout, headers);
  if (!status.ok()) return status.status();
  response.status = *status;
  return response;
}

Status DockerClient::Ping(std::chrono::milliseconds timeout) const {
  Result<HttpResponse> response = Call("GET", "/_ping", "", timeout);
  if (!response.ok()) return Unavailable(response.status().message());
  if (response->status != 200) {
    return Unavailable("Docker API at " + host_ + ": /_ping answered " +
                       std::to_string(response->status));
  }
  return Status::Ok();
}

std::string ApiErrorMessage(const HttpResponse& response) {
  nlohmann::json parsed = nlohmann::json::parse(response.body, nullptr, false);
  if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
    return parsed["message"].get<std::string>();
  }
  std::string body = response.body;
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  if (body.empty()) return "HTTP " + std::to_string(response.status);
  return body.substr(0, 500);
}

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace baton
