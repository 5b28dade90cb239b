#include "engine/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "core/auth.h"
#include "core/duration.h"
#include "core/job_decode.h"
#include "crypto/keyring.h"

namespace baton {
namespace {

// Every key, as its dotted path.
constexpr const char* kKeys[] = {
    "coordinator.address", "coordinator.lease", "coordinator.max_redeliveries", "worker.heartbeat",
    "coordinator.max_loop_iterations", "coordinator.timeout_grace",
    "broker.rabbitmq.management_url", "data_dir", "worker.queues", "broker.type",
    "broker.rabbitmq.url", "broker.rabbitmq.tls.ca", "broker.rabbitmq.tls.cert",
    "broker.rabbitmq.tls.key", "datastore.type", "datastore.sqlite.path", "datastore.postgres.dsn",
    "runtime.type", "runtime.docker.host", "logging.level", "logging.format",
    "runtime.docker.image", "runtime.docker.binds.allowed", "runtime.docker.binds.sources",
    "runtime.docker.config", "runtime.shell.sandbox", "runtime.shell.uid", "runtime.shell.gid",
    // Durability and retention.
    "datastore.sqlite.synchronous", "coordinator.auto_delete.interval",
    "datastore.retention.logs.duration", "datastore.retention.jobs.duration",
    // Scheduled jobs.
    "coordinator.schedules.interval", "coordinator.schedules.max_idle",
    // The API's HTTP server.
    "api.max_connections", "api.max_waits", "api.keep_alive", "api.request_timeout",
    "api.handler_threads", "api.max_buffered_bytes", "api.tls.cert", "api.tls.key",
    // Sizes of what clients send (bytes).
    "api.max_document_bytes", "datastore.max_job_bytes",
    // Webhooks.
    "webhooks.max_attempts", "webhooks.backoff", "webhooks.max_backoff", "webhooks.timeout",
    "webhooks.concurrency", "webhooks.secret", "webhooks.allowed_hosts", "webhooks.allow_private",
    "webhooks.allowed_networks",
    // Secrets at rest.
    "datastore.encryption.key", "datastore.encryption.key_file", "datastore.encryption.old_keys",
    // Authentication.
    "api.auth.enabled", "middleware.web.basicauth.enabled", "api.auth.admin_user",
    "api.auth.admin_password", "api.auth.bcrypt_cost",
    // Tork's web middleware.
    "middleware.web.bodylimit", "middleware.web.cors.enabled", "middleware.web.cors.origins",
    "middleware.web.cors.methods", "middleware.web.cors.headers", "middleware.web.cors.credentials",
    "middleware.web.ratelimit.enabled", "middleware.web.ratelimit.rps"};

// The items of a comma-separated list, blanks around each trimmed, empty ones left out.
std::vector<std::string_view> CommaList(std::string_view rest) {
  std::vector<std::string_view> items;
  while (!rest.empty()) {
    std::string_view item = rest.substr(0, rest.find(','));
    rest.remove_prefix(std::min(rest.size(), item.size() + 1));
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

std::string EnvName(std::string_view key) {
  std::string name = "BATON_";
  for (char c : key) name += c == '.' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

Status Set(Config& config, std::string_view key, const std::string& value) {
  auto one_of = [&](std::initializer_list<std::string_view> allowed) -> Status {
    for (auto a : allowed) {
      if (a == value) return Status::Ok();
    }
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return InvalidArgument(fmt::format("{}: \"{}\" is not one of {}", key, value, list));
  };
  auto duration = [&](std::chrono::milliseconds& out) -> Status {
    auto d = ParseDuration(value);
    if (!d.ok()) return InvalidArgument(fmt::format("{}: {}", key, d.status().message()));
    if (*d <= std::chrono::milliseconds::zero()) {
      return InvalidArgument(fmt::format("{}: must be more than 0", key));
    }
    out = *d;
    return Status::Ok();
  };
  if (key == "coordinator.address") {
    config.coordinator_address = value;
  } else if (key == "coordinator.lease") {
    BATON_RETURN_IF_ERROR(duration(config.coordinator_lease));
  } else if (key == "coordinator.timeout_grace") {
    BATON_RETURN_IF_ERROR(duration(config.coordinator_timeout_grace));
  } else if (key == "coordinator.max_redeliveries") {
    int n = -1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 0 || n > 1000) {
      return InvalidArgument(fmt::format("{}: \"{}\" is not a count 0..1000", key, value));
    }
    config.coordinator_max_redeliveries = n;
  } else if (key == "coordinator.max_loop_iterations") {
    int n = -1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 ||
        n > kMaxLoopIterations) {
      return InvalidArgument(
          fmt::format("{}: \"{}\" is not a count 1..{}", key, value, kMaxLoopIterations));
    }
    config.coordinator_max_loop_iterations = n;
  } else if (key == "broker.rabbitmq.management_url") {
    config.rabbitmq_management_url = value;
  } else if (key == "worker.heartbeat") {
    BATON_RETURN_IF_ERROR(duration(config.worker_heartbeat));
  } else if (key == "data_dir") {
    config.data_dir = value;
  } else if (key == "worker.queues") {
    auto queues = ParseQueues(value);
    if (!queues.ok()) return InvalidArgument(fmt::format("{}: {}", key, queues.status().message()));
    config.worker_queues = *queues;
  } else if (key == "broker.type") {
    BATON_RETURN_IF_ERROR(one_of({"inmemory", "rabbitmq"}));
    config.broker_type = value;
  } else if (key == "broker.rabbitmq.url") {
    config.rabbitmq_url = value;
  } else if (key == "broker.rabbitmq.tls.ca") {
    config.rabbitmq_tls_ca = value;
  } else if (key == "broker.rabbitmq.tls.cert") {
    config.rabbitmq_tls_cert = value;
  } else if (key == "broker.rabbitmq.tls.key") {
    config.rabbitmq_tls_key = value;
  } else if (key == "datastore.type") {
    BATON_RETURN_IF_ERROR(one_of({"sqlite", "postgres"}));
    config.datastore_type = value;
  } else if (key == "datastore.sqlite.path") {
    config.sqlite_path = value;
  } else if (key == "datastore.postgres.dsn") {
    config.postgres_dsn = value;
  } else if (key == "runtime.type") {
    BATON_RETURN_IF_ERROR(one_of({"auto", "shell", "docker"}));
    config.runtime_type = value;
  } else if (key == "runtime.docker.host") {
    config.docker_host = value;
  } else if (key == "runtime.docker.image") {
    config.docker_image = value;
  } else if (key == "runtime.docker.binds.allowed") {
    BATON_RETURN_IF_ERROR(one_of({"true", "false"}));
    config.docker_allow_binds = value == "true";
  } else if (key == "runtime.docker.binds.sources") {
    config.docker_bind_sources.clear();
    for (std::string_view item : CommaList(value)) {
      if (item.front() != '/') {
        return InvalidArgument(fmt::format("{}: \"{}\" is not an absolute path", key, item));
      }
      config.docker_bind_sources.emplace_back(item);
    }
  } else if (key == "runtime.docker.config") {
    config.docker_config = value;
  } else if (key == "runtime.shell.sandbox") {
    BATON_RETURN_IF_ERROR(one_of({"true", "false"}));
    config.shell_sandbox = value == "true";
  } else if (key == "runtime.shell.uid") {
    config.shell_uid = value;
  } else if (key == "runtime.shell.gid") {
    config.shell_gid = value;
  } else if (key == "api.max_connections" || key == "api.max_waits") {
    int n = -1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 || n > 1000000) {
      return InvalidArgument(fmt::format("{}: \"{}\" is not a count 1..1000000", key, value));
    }
    (key == "api.max_waits" ? config.api_max_waits : config.api_max_connections) = n;
  } else if (key == "api.handler_threads") {
    int n = -1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 || n > 256) {
      return InvalidArgument(fmt::format("{}: \"{}\" is not a count 1..256", key, value));
    }
    config.api_handler_threads = n;
  } else if (key == "api.max_buffered_bytes") {
    std::size_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    // Room for two requests of the largest body at least, or one could never be served.
    if (ec != std::errc() || ptr != value.data() + value.size() || n < (8u << 20)) {
      return InvalidArgument(fmt::format(
          "{}: \"{}\" is not a number of bytes of at least 8388608 (8 MiB)", key, value));
    }
    config.api_max_buffered_bytes = n;
  } else if (key == "api.max_document_bytes" || key == "datastore.max_job_bytes") {
    std::size_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1024 || n > (1u << 30)) {
      return InvalidArgument(
          fmt::format("{}: \"{}\" is not a number of bytes 1024..1073741824", key, value));
    }
    (key == "api.max_document_bytes" ? config.api_max_document_bytes
                                     : config.datastore_max_job_bytes) = n;
  } else if (key == "api.tls.cert") {
    config.api_tls_cert = value;
  } else if (key == "api.tls.key") {
    config.api_tls_key = value;
  } else if (key == "api.keep_alive") {
    BATON_RETURN_IF_ERROR(duration(config.api_keep_alive));
  } else if (key == "api.request_timeout") {
    BATON_RETURN_IF_ERROR(duration(config.api_request_timeout));
  } else if (key == "logging.level") {
    BATON_RETURN_IF_ERROR(one_of({"debug", "info", "warn", "error"}));
    config.log_level = value == "debug"   ? log::Level::kDebug
                       : value == "warn"  ? log::Level::kWarn
                       : value == "error" ? log::Level::kError
                                          : log::Level::kInfo;
  } else if (key == "logging.format") {
    BATON_RETURN_IF_ERROR(one_of({"text", "json"}));
    config.log_format = value == "json" ? log::Format::kJson : log::Format::kText;
  } else if (key == "datastore.sqlite.synchronous") {
    BATON_RETURN_IF_ERROR(one_of({"full", "normal", "off"}));
    config.sqlite_synchronous = value;
  } else if (key == "coordinator.auto_delete.interval") {
    BATON_RETURN_IF_ERROR(duration(config.auto_delete_interval));
  } else if (key == "coordinator.schedules.interval") {
    BATON_RETURN_IF_ERROR(duration(config.schedules.interval));
  } else if (key == "coordinator.schedules.max_idle") {
    BATON_RETURN_IF_ERROR(duration(config.schedules.max_idle));
  } else if (key == "datastore.retention.logs.duration" ||
             key == "datastore.retention.jobs.duration") {
    // "0" (or any zero duration) keeps them for ever.
    auto d = ParseDuration(value);
    if (!d.ok()) return InvalidArgument(fmt::format("{}: {}", key, d.status().message()));
    if (*d < std::chrono::milliseconds::zero()) {
      return InvalidArgument(fmt::format("{}: must not be negative", key));
    }
    (key == "datastore.retention.logs.duration" ? config.log_retention : config.job_retention) =
        std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  } else if (key == "webhooks.max_attempts" || key == "webhooks.concurrency") {
    int n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 || n > 100) {
      return InvalidArgument(fmt::format("{}: \"{}\" is not a count 1..100", key, value));
    }
    (key == "webhooks.max_attempts" ? config.webhooks.max_attempts : config.webhooks.concurrency) =
        n;
  } else if (key == "webhooks.backoff") {
    BATON_RETURN_IF_ERROR(duration(config.webhooks.backoff));
  } else if (key == "webhooks.max_backoff") {
    BATON_RETURN_IF_ERROR(duration(config.webhooks.max_backoff));
  } else if (key == "webhooks.timeout") {
    BATON_RETURN_IF_ERROR(duration(config.webhooks.timeout));
    // A claim outlives the attempt it covers, or another coordinator sends it again.
    config.webhooks.claim = std::max(config.webhooks.claim, 3 * config.webhooks.timeout);
  } else if (key == "webhooks.secret") {
    config.webhooks.secret = value;
  } else if (key == "datastore.encryption.key") {
    // Checked here, so a malformed key is a start-up error naming the key (never quoting it).
    if (!value.empty()) {
      Result<crypto::Key> parsed = crypto::ParseKey(value);
      if (!parsed.ok())
        return InvalidArgument(fmt::format("{}: {}", key, parsed.status().message()));
    }
    config.encryption_key = value;
  } else if (key == "datastore.encryption.key_file") {
    config.encryption_key_file = value;
  } else if (key == "datastore.encryption.old_keys") {
    config.encryption_old_keys.clear();
    int n = 0;
    for (std::string_view item : CommaList(value)) {
      ++n;
      Result<crypto::Key> parsed = crypto::ParseKey(item);
      if (!parsed.ok()) {
        return InvalidArgument(fmt::format("{}: item {}: {}", key, n, parsed.status().message()));
      }
      config.encryption_old_keys.emplace_back(item);
    }
  } else if (key == "webhooks.allowed_hosts") {
    config.webhooks.allowed_hosts.clear();
    for (std::string_view item : CommaList(value)) {
      std::string host(item);
      std::transform(host.begin(), host.end(), host.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      config.webhooks.allowed_hosts.push_back(std::move(host));
    }
  } else if (key == "webhooks.allow_private") {
    BATON_RETURN_IF_ERROR(one_of({"true", "false"}));
    config.webhooks.allow_private = value == "true";
  } else if (key == "webhooks.allowed_networks") {
    config.webhooks.allowed_networks.clear();
    int n = 0;
    for (std::string_view item : CommaList(value)) {
      ++n;
      Result<IpNetwork> network = ParseNetwork(item);
      if (!network.ok()) {
        return InvalidArgument(fmt::format("{}: item {}: {}", key, n, network.status().message()));
      }
      config.webhooks.allowed_networks.push_back(*network);
    }
  } else if (key == "api.auth.enabled" || key == "middleware.web.basicauth.enabled") {
    BATON_RETURN_IF_ERROR(one_of({"true", "false"}));
    (key == "api.auth.enabled" ? config.api_auth_enabled : config.tork_basicauth_enabled) =
        value == "true";
  } else if (key == "api.auth.admin_user") {
    if (Status s = ValidateName(key, value); !s.ok()) return s;
    config.api_auth_admin_user = value;
  } else if (key == "api.auth.admin_password") {
    // Never echoed back, not even in an error.
    if (value.size() > 72) {
      return InvalidArgument(fmt::format("{}: over 72 bytes (bcrypt reads no further)", key));
    }
    config.api_auth_admin_password = value;
  } else if (key == "api.auth.bcrypt_cost") {
    int n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 4 || n > 15) {
      return InvalidArgument(fmt::format("{}: \"{}\" is not a cost 4..15", key, value));
    }
    config.api_auth_bcrypt_cost = n;
  } else if (key == "middleware.web.bodylimit") {
    auto bytes = ParseMemory(value);
    if (!bytes.ok() || *bytes < 1024 || *bytes > (std::int64_t{1} << 30)) {
      return InvalidArgument(fmt::format(
          "{}: \"{}\" is not a size from 1K to 1G (use e.g. 500K, 4M)", key, value.substr(0, 50)));
    }
    config.api_max_body_bytes = static_cast<std::size_t>(*bytes);
  } else if (key == "middleware.web.cors.enabled" || key == "middleware.web.cors.credentials" ||
             key == "middleware.web.ratelimit.enabled") {
    BATON_RETURN_IF_ERROR(one_of({"true", "false"}));
    (key == "middleware.web.cors.enabled"       ? config.cors_enabled
     : key == "middleware.web.cors.credentials" ? config.cors_credentials
                                                : config.rate_limit_enabled) = value == "true";
  } else if (key == "middleware.web.cors.origins" || key == "middleware.web.cors.methods" ||
             key == "middleware.web.cors.headers") {
    if (value.empty())
      return InvalidArgument(fmt::format("{}: must not be empty (* for any)", key));
    if (key == "middleware.web.cors.origins") {
      config.cors_origins.clear();
      for (std::string_view origin : CommaList(value)) config.cors_origins.emplace_back(origin);
    } else {
      (key == "middleware.web.cors.methods" ? config.cors_methods : config.cors_headers) = value;
    }
  } else if (key == "middleware.web.ratelimit.rps") {
    int n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 || n > 1000000) {
      return InvalidArgument(fmt::format("{}: \"{}\" is not a rate 1..1000000 (requests a second)",
                                         key, value.substr(0, 50)));
    }
    config.rate_limit_rps = n;
  } else {
    return InvalidArgument(fmt::format("unknown configuration key {}", key));
  }
  return Status::Ok();
}

// Flattens a TOML table into dotted keys; worker.queues stays one key.
Status Walk(const toml::table& table, const std::string& prefix, Config& config) {
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (key == "worker.queues") {
      const toml::table* queues = node.as_table();
      if (queues == nullptr)
        return InvalidArgument("worker.queues: expected a table name = concurrency");
      std::map<std::string, int> parsed;
      for (const auto& [name, value] : *queues) {
        auto n = value.value<int64_t>();
        if (!n || *n < 1 || *n > 10000) {
          return InvalidArgument(
              fmt::format("worker.queues.{}: expected a concurrency 1..10000", name.str()));
        }
        parsed[std::string(name.str())] = static_cast<int>(*n);
      }
      config.worker_queues = parsed;
      continue;
    }
    if (const toml::table* sub = node.as_table()) {
      BATON_RETURN_IF_ERROR(Walk(*sub, key, config));
      continue;
    }
    auto text = node.value<std::string>();
    if (!text && node.is_integer()) text = std::to_string(*node.value<int64_t>());
    if (!text && node.is_boolean()) text = *node.value<bool>() ? "true" : "false";
    if (!text) {
      bool known = false;
      for (const char* k2 : kKeys) known = known || key == k2;
      if (!known) return InvalidArgument(fmt::format("unknown configuration key {}", key));
      return InvalidArgument(fmt::format("{}: expected a string", key));
    }
    BATON_RETURN_IF_ERROR(Set(config, key, *text));
  }
  return Status::Ok();
}

}  // namespace

Result<std::map<std::string, int>> ParseQueues(std::string_view text) {
  std::map<std::string, int> queues;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    auto colon = item.find(':');
    std::string_view name = item.substr(0, colon);
    int concurrency = 1;
    if (colon != std::string_view::npos) {
      std::string_view n = item.substr(colon + 1);
      auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), concurrency);
      if (ec != std::errc() || ptr != n.data() + n.size() || concurrency < 1 ||
          concurrency > 10000) {
        return InvalidArgument(
            fmt::format("bad concurrency in \"{}\" (expected name:1..10000)", item));
      }
    }
    if (name.empty()) return InvalidArgument(fmt::format("empty queue name in \"{}\"", item));
    queues[std::string(name)] = concurrency;
  }
  return queues;
}

Status MakePathsAbsolute(Config& config) {
  auto absolute = [](std::string_view key, std::string& path) -> Status {
    std::error_code ec;
    std::filesystem::path full = std::filesystem::absolute(path, ec);
    if (ec) {
      return InvalidArgument(
          fmt::format("{}: cannot make \"{}\" absolute: {}", key, path, ec.message()));
    }
    path = full.lexically_normal().string();
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return Status::Ok();
  };
  if (config.data_dir.empty()) return InvalidArgument("data_dir: must not be empty");
  BATON_RETURN_IF_ERROR(absolute("data_dir", config.data_dir));
  if (!config.sqlite_path.empty()) {
    BATON_RETURN_IF_ERROR(absolute("datastore.sqlite.path", config.sqlite_path));
  }
  if (!config.encryption_key_file.empty()) {
    BATON_RETURN_IF_ERROR(absolute("datastore.encryption.key_file", config.encryption_key_file));
  }
  if (!config.api_tls_cert.empty())
    BATON_RETURN_IF_ERROR(absolute("api.tls.cert", config.api_tls_cert));
  if (!config.api_tls_key.empty())
    BATON_RETURN_IF_ERROR(absolute("api.tls.key", config.api_tls_key));
  for (auto [key, path] : {std::pair{"broker.rabbitmq.tls.ca", &config.rabbitmq_tls_ca},
                           std::pair{"broker.rabbitmq.tls.cert", &config.rabbitmq_tls_cert},
                           std::pair{"broker.rabbitmq.tls.key", &config.rabbitmq_tls_key}}) {
    if (!path->empty()) BATON_RETURN_IF_ERROR(absolute(key, *path));
  }
  return Status::Ok();
}

Result<Config> LoadConfig(const std::string& file,
                          const std::function<const char*(const char*)>& env) {
  Config config;
  std::string path = file;
  if (path.empty()) {
    if (const char* from_env = env("BATON_CONFIG"); from_env != nullptr && *from_env) {
      path = from_env;
    } else if (std::filesystem::exists("baton.toml")) {
      path = "baton.toml";
    }
  }
  if (!path.empty()) {
    try {
      toml::table table = toml::parse_file(path);
      Status s = Walk(table, "", config);
      if (!s.ok()) return InvalidArgument(fmt::format("{}: {}", path, s.message()));
    } catch (const toml::parse_error& e) {
      const auto& where = e.source().begin;
      return InvalidArgument(
          fmt::format("{}:{}:{}: {}", path, where.line, where.column, e.description()));
    }
  }
  for (const char* key : kKeys) {
    std::string name = EnvName(key);
    if (const char* value = env(name.c_str()); value != nullptr) {
      Status s = Set(config, key, value);
      if (!s.ok()) return InvalidArgument(fmt::format("{}: {}", name, s.message()));
    }
  }
  // Waits hold connections: some must stay for everyone else.
  if (config.api_max_waits >= config.api_max_connections) {
    return InvalidArgument(
        fmt::format("api.max_waits ({}) must be less than api.max_connections ({}), or waiting "
                    "submissions could take every connection",
                    config.api_max_waits, config.api_max_connections));
  }
  if (config.api_tls_cert.empty() != config.api_tls_key.empty()) {
    return InvalidArgument(
        "api.tls.cert and api.tls.key go together: set both for HTTPS, or neither");
  }
  // Room for two requests of the largest body at least, or one could never be served.
  if (config.api_max_buffered_bytes < 2 * config.api_max_body_bytes) {
    return InvalidArgument(fmt::format(
        "api.max_buffered_bytes ({}) must be at least twice middleware.web.bodylimit ({})",
        config.api_max_buffered_bytes, config.api_max_body_bytes));
  }
  BATON_RETURN_IF_ERROR(MakePathsAbsolute(config));
  return config;
}

}  // namespace baton
