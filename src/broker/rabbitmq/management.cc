#include "broker/rabbitmq/management.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "base/url.h"
#include "http/client.h"

namespace baton::rabbitmq_internal {
namespace {

using nlohmann::json;

QueueInfo InfoOf(const json& q) {
  auto count = [&](const char* key) -> std::int64_t {
    auto it = q.find(key);
    return it != q.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
  };
  QueueInfo info;
  info.name = q.value("name", "");
  info.size = count("messages_ready");
  info.unacked = count("messages_unacknowledged");
  info.subscribers = count("consumers");
  return info;
}

}  // namespace

Result<ManagementApi> ManagementApi::Parse(std::string_view url, std::string user,
                                           std::string password, std::string ca_file) {
  const bool https = url.starts_with("https://");
  if (!https && !url.starts_with("http://")) {
    return InvalidArgument(
        "broker.rabbitmq.management_url: expected http(s)://[user:password@]host:port");
  }
  std::string_view rest = url.substr(https ? 8 : 7);
  while (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return InvalidArgument("broker.rabbitmq.management_url: expected no path after host:port");
  }
  ManagementApi api;
  api.scheme_ = https ? "https" : "http";
  api.ca_file_ = std::move(ca_file);
  api.user_ = std::move(user);
  api.password_ = std::move(password);
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    api.user_ = PercentDecode(userinfo.substr(0, colon));
    api.password_ =
        colon == std::string_view::npos ? "" : PercentDecode(userinfo.substr(colon + 1));
  }
  auto colon = rest.rfind(':');
  api.host_ = std::string(rest.substr(0, colon));
  if (colon != std::string_view::npos) {
    std::string_view port = rest.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), api.port_);
    if (ec != std::errc() || ptr != port.data() + port.size() || api.port_ < 1 ||
        api.port_ > 65535) {
      return InvalidArgument(fmt::format("broker.rabbitmq.management_url: bad port \"{}\"", port));
    }
  }
  if (api.host_.empty()) return InvalidArgument("broker.rabbitmq.management_url: no host");
  api.where_ = fmt::format("{}:{}", api.host_, api.port_);
  return api;
}

Result<std::string> ManagementApi::Get(const std::string& path) const {
  http::ClientRequest request;
  request.url = fmt::format("{}://{}{}", scheme_, where_, path);
  request.ca_file = ca_file_;
  request.user = user_;
  request.password = password_;
  request.connect_timeout = std::chrono::seconds(5);
  request.timeout = std::chrono::seconds(15);
  auto res = http::Client().Send(request);
  if (!res.ok()) {
    return Unavailable(
        fmt::format("RabbitMQ management API at {}: {}", where_, res.status().message()));
  }
  if (res->status == 404) return NotFound("not found");
  if (res->status == 401 || res->status == 403) {
    return FailedPrecondition(fmt::format(
        "RabbitMQ management API at {} refused the credentials (HTTP {})", where_, res->status));
  }
  if (res->status != 200) {
    return Unavailable(fmt::format("RabbitMQ management API at {}: HTTP {}", where_, res->status));
  }
  return std::move(res->body);
}

Result<QueueInfo> ManagementApi::Queue(std::string_view vhost, std::string_view name) const {
  auto body = Get(fmt::format("/api/queues/{}/{}", PercentEncode(vhost), PercentEncode(name)));
  if (!body.ok()) {
    if (body.status().code() == StatusCode::kNotFound) {
      return NotFound(fmt::format("no queue named '{}'", name));
    }
    return body.status();
  }
  json q = json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!q.is_object())
    return Unavailable(fmt::format("RabbitMQ management API at {}: not JSON", where_));
  return InfoOf(q);
}

Result<std::vector<QueueInfo>> ManagementApi::Queues(std::string_view vhost) const {
  auto body = Get(
      fmt::format("/api/queues/{}?columns=name,messages_ready,messages_unacknowledged,consumers",
                  PercentEncode(vhost)));
  if (!body.ok()) return body.status();
  json list = json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array())
    return Unavailable(fmt::format("RabbitMQ management API at {}: not a list", where_));
  std::vector<QueueInfo> infos;
  for (const json& q : list) {
    if (q.is_object()) infos.push_back(InfoOf(q));
  }
  std::sort(infos.begin(), infos.end(),
            [](const QueueInfo& a, const QueueInfo& b) { return a.name < b.name; });
  return infos;
}

}  // namespace baton::rabbitmq_internal
