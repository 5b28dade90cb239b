// Configuration: a TOML file, every key overridable by an environment variable
// BATON_<KEY PATH IN UPPER CASE, "." → "_"> (datastore.sqlite.path →
// BATON_DATASTORE_SQLITE_PATH). Unknown keys and bad values are errors naming the key.
// configs/sample.toml documents every key.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "coordinator/schedules.h"
#include "coordinator/webhooks.h"

namespace baton {

struct Config {
  std::string coordinator_address = "localhost:8000";
  // A RUNNING task's worker must heartbeat within this, or the task is re-queued.
  std::chrono::milliseconds coordinator_lease = std::chrono::seconds(30);
  // coordinator.timeout_grace: how long past a task's `timeout` a coordinator waits for its
  // worker to stop it before failing it itself and telling the worker to kill it.
  std::chrono::milliseconds coordinator_timeout_grace = std::chrono::seconds(30);
  // A task whose worker died is re-queued this many times, then fails.
  int coordinator_max_redeliveries = 3;
  // The most iterations a job's loop may ask for (its `max`).
  int coordinator_max_loop_iterations = 1000;
  std::chrono::milliseconds worker_heartbeat = std::chrono::seconds(5);
  std::string data_dir = ".baton";
  std::map<std::string, int> worker_queues;  // empty: {default = <cores>}
  std::string broker_type = "inmemory";
  std::string rabbitmq_url = "amqp://guest:guest@localhost:5672/";
  // For an amqps:// URL: the CA file the server's certificate is checked against (empty:
  // the system's), and the client certificate and key shown to the server (PEM files).
  std::string rabbitmq_tls_ca;
  std::string rabbitmq_tls_cert;
  std::string rabbitmq_tls_key;
  // RabbitMQ's management API (http://user:password@host:15672), for queue statistics
  // across every process (messages ready, unacked, consumers). Empty: AMQP alone.
  std::string rabbitmq_management_url;
  std::string datastore_type = "sqlite";
  std::string sqlite_path;  // empty: <data_dir>/baton.db
  std::string postgres_dsn;
  std::string runtime_type = "shell";
  std::string docker_host = "unix:///var/run/docker.sock";
  std::string docker_image = "busybox:latest";  // for tasks that name no image
  bool docker_allow_binds = false;
  std::vector<std::string> docker_bind_sources;  // empty: any source, when allowed
  std::string docker_config;                     // empty: ~/.docker/config.json
  // runtime.shell.sandbox: hide the data directory from shell tasks (a mount namespace
  // per task, locked with Landlock), where the host allows.
  bool shell_sandbox = true;
  // runtime.shell.uid / gid (Tork's keys): the user and group shell tasks run as, a number
  // or a name; empty: Baton's own, except with authentication on (then `nobody`).
  std::string shell_uid;
  std::string shell_gid;
  // The REST API's HTTP server (api.*; api/server.h says what each bounds).
  int api_max_connections = 10000;
  int api_max_waits = 1000;
  int api_handler_threads = 8;
  std::size_t api_max_buffered_bytes = 256 << 20;
  std::chrono::milliseconds api_keep_alive = std::chrono::seconds(5);
  std::chrono::milliseconds api_request_timeout = std::chrono::seconds(10);
  // api.tls.cert / api.tls.key: PEM files of the certificate (its chain after it) and its
  // key; both set, the API speaks HTTPS only (TLS 1.2+), and re-reads them on SIGHUP.
  std::string api_tls_cert;
  std::string api_tls_key;
  // api.max_document_bytes: the text a submitted document may expand to, YAML aliases
  // counted at each use (core/document.h); datastore.max_job_bytes: the most a job may
  // take as stored, however it was created (datastore/datastore.h).
  std::size_t api_max_document_bytes = 8 << 20;
  std::size_t datastore_max_job_bytes = 32 << 20;

  // Authentication (docs/auth.md). api.auth.enabled (or Tork's
  // middleware.web.basicauth.enabled): credentials on every route but GET /health.
  // api.auth.admin_user / .admin_password: a user with the admin role created at start
  // when none of that name exists (the first admin). api.auth.bcrypt_cost: 4..15.
  bool api_auth_enabled = false;
  bool tork_basicauth_enabled = false;
  // Either key set true turns authentication on.
  bool AuthEnabled() const { return api_auth_enabled || tork_basicauth_enabled; }
  std::string api_auth_admin_user = "admin";
  std::string api_auth_admin_password;
  int api_auth_bcrypt_cost = 10;
  // Tork's web middleware keys. middleware.web.bodylimit: the largest request body
  // (a size: "500K", "4M"; 4M by default); middleware.web.cors.*: CORS answers for the
  // browsers of other origins; middleware.web.ratelimit.*: requests a second per client
  // address (GET /health aside).
  std::size_t api_max_body_bytes = 4 << 20;
  bool cors_enabled = false;
  std::vector<std::string> cors_origins = {"*"};  // from a comma-separated list; * for any
  std::string cors_methods = "*";
  std::string cors_headers = "*";
  bool cors_credentials = false;
  bool rate_limit_enabled = false;
  int rate_limit_rps = 20;

  log::Level log_level = log::Level::kInfo;
  log::Format log_format = log::Format::kText;

  // Durability and retention.
  // datastore.sqlite.synchronous: "full" (an acknowledged write survives a power
  // failure), "normal" or "off" (see configs/sample.toml for what each may lose).
  std::string sqlite_synchronous = "full";
  // coordinator.auto_delete.interval: how often the coordinator deletes the jobs whose
  // autoDelete time has come.
  std::chrono::milliseconds auto_delete_interval = std::chrono::seconds(60);
  // datastore.retention.logs.duration / .jobs.duration (Tork's keys and defaults): log
  // parts, and finished top-level jobs by their creation, older than this are deleted at
  // each sweep (coordinator.auto_delete.interval). 0: kept for ever.
  std::chrono::milliseconds log_retention = std::chrono::hours(168);
  std::chrono::milliseconds job_retention = std::chrono::hours(8760);

  // Secrets at rest (datastore/sql/secrets.h), AES-256-GCM. datastore.encryption.key: the
  // primary key (64 hex digits or base64 of 32 bytes); .key_file: a file of keys, one a
  // line, the primary first (not both); .old_keys: older keys beside `key`, for reading
  // until `baton secrets rotate` is done. None of them: SQLite uses (creating it on
  // first start) <data_dir>/secrets.key; PostgreSQL stores secrets in plain, with a
  // warning at start-up.
  std::string encryption_key;
  std::string encryption_key_file;
  std::vector<std::string> encryption_old_keys;
  // Scheduled jobs (coordinator/schedules.h): coordinator.schedules.interval, the
  // shortest time between two looks for due ticks, and .max_idle, the longest.
  ScheduleOptions schedules;

  // Webhooks (coordinator/webhooks.h): webhooks.max_attempts, .backoff, .max_backoff,
  // .timeout, .concurrency, .secret, .allowed_hosts (comma-separated hosts), .allow_private
  // (true: any address), .allowed_networks (comma-separated CIDRs allowed besides public
  // addresses).
  WebhookOptions webhooks;
};

// Reads `file` (empty: $BATON_CONFIG, else ./baton.toml when present, else defaults),
// then applies environment overrides from `env` (a lookup such as getenv), then makes the
// paths absolute (MakePathsAbsolute).
Result<Config> LoadConfig(const std::string& file,
                          const std::function<const char*(const char*)>& env);

// Makes data_dir and a set datastore.sqlite.path absolute, against the current directory,
// once, where the configuration is resolved: every path derived from them (the database,
// the task directories, $BATON_OUTPUT) is then absolute too. Tasks run in directories of
// their own, where a relative path would name something else. An empty data_dir is an
// error. Call it again after changing data_dir (e.g. from a command-line flag).
Status MakePathsAbsolute(Config& config);

// Parses "name:concurrency[,name:concurrency...]".
Result<std::map<std::string, int>> ParseQueues(std::string_view text);

}  // namespace baton
