#include "engine/engine.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "auth/auth.h"
#include "base/log.h"
#include "base/version.h"
#include "broker/inmemory/inmemory_broker.h"
#include "broker/rabbitmq/rabbitmq_broker.h"
#include "core/auth.h"
#include "core/names.h"
#include "crypto/keyring.h"
#include "crypto/signing_key.h"
#include "datastore/postgres/postgres_datastore.h"
#include "datastore/postgres/postgres_locker.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "engine/data_dir.h"
#include "engine/task_user.h"
#include "runtime/docker/docker_runtime.h"
#include "runtime/shell/sandbox.h"
#include "runtime/shell/shell_runtime.h"
#include "webhook/sender.h"

namespace baton {
namespace {

std::string SqlitePath(const Config& config) {
  return config.sqlite_path.empty() ? config.data_dir + "/baton.db" : config.sqlite_path;
}

// datastore.sqlite.synchronous, checked by LoadConfig.
SqliteSync SqliteSyncOf(const Config& config) {
  if (config.sqlite_synchronous == "normal") return SqliteSync::kNormal;
  if (config.sqlite_synchronous == "off") return SqliteSync::kOff;
  return SqliteSync::kFull;
}

// The configured queues, or the default queue with one slot per core.
std::map<std::string, int> WorkerQueues(const Config& config) {
  if (!config.worker_queues.empty()) return config.worker_queues;
  return {{"default", static_cast<int>(std::max(1U, std::thread::hardware_concurrency()))}};
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// A worker node named `name`, reporting this build's version (GET /nodes, as Tork's does).
WorkerOptions WorkerOptionsFor(const Config& config, const std::string& name) {
  WorkerOptions worker;
  worker.name = name;
  worker.heartbeat_interval = config.worker_heartbeat;
  worker.version = Version();
  return worker;
}

// The shell runtime: tasks in <data_dir>/tasks, the data directory hidden from them where
// the host allows (runtime.shell.sandbox), as the user runtime.shell.uid / gid and the
// authentication rule give (task_user.h). Says at start-up what a task can reach.
Result<std::unique_ptr<Runtime>> MakeShellRuntime(const Config& config) {
  ShellRuntimeOptions shell;
  shell.base_dir = config.data_dir + "/tasks";
  if (config.shell_sandbox) shell.hidden_dirs = {config.data_dir};
  BATON_ASSIGN_OR_RETURN(
      std::optional<TaskUser> user,
      ResolveTaskUser(config, ::geteuid(), ProbeSandboxHost("").can_change_user));
  if (user) {
    BATON_RETURN_IF_ERROR(CheckTaskUserCanReach(config.data_dir, *user));
    shell.uid = user->uid;
    shell.gid = user->gid;
  }
  auto runtime = std::make_unique<ShellRuntime>(shell);
  const std::string who =
      user ? fmt::format("uid {} gid {}", user->uid, user->gid) : "Baton's own user";
  if (runtime->sandboxed()) {
    const int abi = runtime->sandbox_host().landlock_abi;
    log::Info("Tasks cannot see the data directory: each runs in a mount namespace of its own.",
              {{"data_dir", config.data_dir},
               {"landlock",
                abi > 0 && runtime->landlocked() ? "ABI " + std::to_string(abi) : "unavailable"},
               {"tasks_run_as", who}});
  } else {
    const std::string why =
        config.shell_sandbox ? runtime->sandbox_unavailable() : "runtime.shell.sandbox = false";
    if (user) {
      // The data directory is 0700: another user could not even reach its task directory.
      return FailedPrecondition(fmt::format(
          "tasks are to run as uid {} (runtime.shell.uid, or api.auth.enabled), which needs the "
          "sandbox to reach their directories inside the private data directory, but {}",
          user->uid, why));
    }
    log::Warn(
        "Tasks can read the data directory (the key, the database, other tasks' "
        "directories) as Baton's own user: no sandbox.",
        {{"data_dir", config.data_dir}, {"reason", why}});
  }
  return std::unique_ptr<Runtime>(std::move(runtime));
}

// The runtime runtime.type names; `auto` is the Docker API when its socket answers, else
// the shell. Says which at start-up.
Result<std::unique_ptr<Runtime>> MakeRuntime(const Config& config) {
  if (config.runtime_type == "shell") {
    log::Info("Runtime: shell (tasks run as local processes).");
    return MakeShellRuntime(config);
  }
  DockerRuntimeOptions docker;
  docker.host = config.docker_host;
  docker.default_image = config.docker_image;
  docker.base_dir = config.data_dir + "/tasks";
  docker.allow_binds = config.docker_allow_binds;
  docker.bind_sources = config.docker_bind_sources;
  docker.hidden_dirs = {config.data_dir};
  docker.docker_config = config.docker_config;
  auto runtime = std::make_unique<DockerRuntime>(docker);
  Status health = runtime->Health();
  if (health.ok()) {
    log::Info("Runtime: docker (tasks run in containers).",
              {{"runtime.docker.host", config.docker_host}, {"runtime.type", config.runtime_type}});
    return std::unique_ptr<Runtime>(std::move(runtime));
  }
  if (config.runtime_type == "docker") {
    return FailedPrecondition(fmt::format(
        "runtime.type = docker, but the Docker API does not answer: {}", health.message()));
  }
  log::Info("Runtime: shell (runtime.type = auto and no Docker API answers).",
            {{"runtime.docker.host", config.docker_host}, {"reason", health.message()}});
  return MakeShellRuntime(config);
}

// Makes the data directory private to Baton's user (data_dir.h), saying what it tightened.
Status PrepareDataDir(const Config& config) {
  std::vector<std::string> tightened;
  BATON_RETURN_IF_ERROR(SecureDataDir(config.data_dir, &tightened));
  for (const std::string& path : tightened) {
    log::Warn(
        "Made a path in the data directory private to Baton's user (it was readable by "
        "others).",
        {{"path", path}});
  }
  return Status::Ok();
}

// The key file SQLite uses when none is configured.
std::string DefaultKeyFile(const Config& config) { return config.data_dir + "/secrets.key"; }

// The keys secrets are encrypted with (config.h's datastore.encryption.*). With none
// configured: `default_file` (SQLite) reads <data_dir>/secrets.key, creating it first when
// `create` is set; otherwise null (secrets stored in plain). Errors name the key or file,
// never a key's text.
Result<std::shared_ptr<const crypto::Keyring>> KeyringFor(const Config& config, bool default_file,
                                                          bool create) {
  if (!config.encryption_key.empty() && !config.encryption_key_file.empty()) {
    return InvalidArgument(
        "datastore.encryption.key and datastore.encryption.key_file are both set: give one");
  }
  std::vector<crypto::Key> keys;
  std::string file = config.encryption_key_file;
  if (!config.encryption_key.empty()) {
    Result<crypto::Key> key = crypto::ParseKey(config.encryption_key);
    if (!key.ok()) {
      return InvalidArgument("datastore.encryption.key: " + key.status().message());
    }
    keys.push_back(*key);
  } else if (file.empty() && default_file) {
    file = DefaultKeyFile(config);
    if (create && !std::filesystem::exists(file)) {
      Status created = crypto::CreateKeyFile(file);
      if (!created.ok() && created.code() != StatusCode::kAlreadyExists) {
        return FailedPrecondition("datastore.encryption: " + created.message());
      }
      if (created.ok()) {
        log::Info("Created a key for secrets at rest (keep it with the database).",
                  {{"key_file", file}});
      }
    }
  }
  if (keys.empty() && !file.empty()) {
    Result<std::vector<crypto::Key>> read = crypto::ReadKeyFile(file);
    if (!read.ok()) {
      return Status(read.status().code(),
                    "datastore.encryption.key_file: " + read.status().message());
    }
    keys = std::move(*read);
  }
  if (keys.empty()) {
    if (!config.encryption_old_keys.empty()) {
      return InvalidArgument(
          "datastore.encryption.old_keys is set without datastore.encryption.key or key_file");
    }
    return std::shared_ptr<const crypto::Keyring>();
  }
  for (const std::string& text : config.encryption_old_keys) {
    Result<crypto::Key> key = crypto::ParseKey(text);
    if (!key.ok()) {
      return InvalidArgument("datastore.encryption.old_keys: " + key.status().message());
    }
    keys.push_back(*key);
  }
  Result<crypto::Keyring> ring = crypto::Keyring::Make(std::move(keys));
  if (!ring.ok()) return InvalidArgument("datastore.encryption: " + ring.status().message());
  log::Info("Secrets are encrypted at rest (AES-256-GCM).",
            {{"key_id", ring->primary_id()}, {"keys", std::to_string(ring->ids().size())}});
  return std::make_shared<const crypto::Keyring>(std::move(*ring));
}

// The key of webhooks without a `secret` of their own: webhooks.secret, else with
// `make_file` (the only coordinator) <data_dir>/webhooks.key, made at first start; else
// none, with a warning (one coordinator's key would not be the others', as for secrets at
// rest). Errors name the file.
Result<std::string> WebhookKeyFor(const Config& config, bool make_file) {
  if (!config.webhooks.secret.empty()) return config.webhooks.secret;
  if (!make_file) {
    log::Warn(
        "Webhooks without a secret of their own are not signed: set webhooks.secret (the "
        "same on every coordinator) to sign them.");
    return std::string();
  }
  const std::string file = config.data_dir + "/webhooks.key";
  bool created = false;
  Result<std::string> key = crypto::ReadOrCreateSigningKey(file, &created);
  if (!key.ok()) return FailedPrecondition("webhooks.secret: " + key.status().message());
  if (created) {
    log::Info("Created the key webhooks are signed with (give it to their receivers).",
              {{"key_file", file}});
  }
  return key;
}

}  // namespace

Result<RotationReport> Engine::RotateSecrets(
    const Config& given, int batch,
    const std::function<void(SecretTable, const RotationReport&)>& progress) {
  Config config = given;
  BATON_RETURN_IF_ERROR(MakePathsAbsolute(config));
  const bool sqlite = config.datastore_type != "postgres";
  BATON_ASSIGN_OR_RETURN(auto keys, KeyringFor(config, sqlite, /*create=*/false));
  if (!keys) {
    return FailedPrecondition(
        "no encryption key is configured (datastore.encryption.key or "
        "datastore.encryption.key_file): there is nothing to rotate to");
  }
  if (!sqlite) {
    PostgresOptions pg;
    pg.dsn = config.postgres_dsn;
    pg.keyring = keys;
    BATON_ASSIGN_OR_RETURN(auto datastore, PostgresDatastore::Open(pg));
    return baton::RotateSecrets(*datastore, batch, progress);
  }
  SqliteOptions options;
  options.path = SqlitePath(config);
  options.keyring = keys;
  BATON_ASSIGN_OR_RETURN(auto datastore, SqliteDatastore::Open(options));
  return baton::RotateSecrets(*datastore, batch, progress);
}

Result<std::unique_ptr<Engine>> Engine::Standalone(const Config& given) {
  // A library caller may pass a relative data_dir: resolved here as LoadConfig does.
  Config config = given;
  BATON_RETURN_IF_ERROR(MakePathsAbsolute(config));
  if (config.broker_type != "inmemory") {
    return FailedPrecondition(
        "broker.type: standalone uses the in-memory broker; rabbitmq is "
        "for `baton run coordinator` / `baton run worker`");
  }
  if (config.datastore_type != "sqlite") {
    return FailedPrecondition("datastore.type: only sqlite is available in this version");
  }
  BATON_RETURN_IF_ERROR(PrepareDataDir(config));
  SqliteOptions sqlite;
  sqlite.path = SqlitePath(config);
  sqlite.synchronous = SqliteSyncOf(config);
  sqlite.max_job_bytes = config.datastore_max_job_bytes;
  BATON_ASSIGN_OR_RETURN(sqlite.keyring,
                         KeyringFor(config, /*default_file=*/true, /*create=*/true));
  BATON_ASSIGN_OR_RETURN(auto datastore, SqliteDatastore::Open(sqlite));
  BATON_ASSIGN_OR_RETURN(auto runtime, MakeRuntime(config));
  WorkerOptions worker = WorkerOptionsFor(config, "standalone");
  worker.queues = WorkerQueues(config);
  CoordinatorOptions coordinator;
  coordinator.version = Version();
  coordinator.timeout_grace = config.coordinator_timeout_grace;
  // POST /jobs answers once the job is stored; the scheduler starts it right after.
  coordinator.scheduler.start_in_background = true;
  coordinator.scheduler.max_loop_iterations = config.coordinator_max_loop_iterations;
  coordinator.auto_delete_interval = config.auto_delete_interval;
  coordinator.schedules = config.schedules;
  coordinator.webhooks = config.webhooks;
  BATON_ASSIGN_OR_RETURN(coordinator.webhooks.secret, WebhookKeyFor(config, /*make_file=*/true));
  coordinator.log_retention = config.log_retention;
  coordinator.job_retention = config.job_retention;
  // The only coordinator: what a killed predecessor was sending is its own to send again.
  coordinator.webhooks.release_claims_at_start = true;
  SqliteDatastore* sqlite_store = datastore.get();
  auto engine = std::make_unique<Engine>(std::move(datastore), std::make_unique<InMemoryBroker>(),
                                         std::move(runtime), std::make_unique<SystemClock>(),
                                         NewThreadTimers(), worker, coordinator);
  // The engine owns the datastore and stops the trimmer before it goes.
  engine->trimmer_.SetBeforeTrim([sqlite_store] { sqlite_store->ReleaseMemory(); });
  return engine;
}

Result<std::unique_ptr<Engine>> Engine::Distributed(const Config& given, const std::string& role) {
  // A library caller may pass a relative data_dir: resolved here as LoadConfig does.
  Config config = given;
  BATON_RETURN_IF_ERROR(MakePathsAbsolute(config));
  if (config.broker_type != "rabbitmq") {
    return FailedPrecondition(fmt::format(
        "broker.type: `baton run {}` needs broker.type = \"rabbitmq\" (set broker.rabbitmq.url)",
        role));
  }
  RabbitMqOptions rabbit;
  rabbit.url = config.rabbitmq_url;
  rabbit.tls_ca = config.rabbitmq_tls_ca;
  rabbit.tls_cert = config.rabbitmq_tls_cert;
  rabbit.tls_key = config.rabbitmq_tls_key;
  rabbit.management_url = config.rabbitmq_management_url;
  BATON_ASSIGN_OR_RETURN(auto broker, RabbitMqBroker::Connect(rabbit));
  WorkerOptions worker = WorkerOptionsFor(config, role);
  if (role == "worker") {
    worker.queues = WorkerQueues(config);
    BATON_RETURN_IF_ERROR(PrepareDataDir(config));
    // Messages of tasks cancelled while queued may wait in RabbitMQ for a worker that
    // starts later: it takes tasks once a coordinator told it of them (Worker::AwaitDrops).
    worker.await_drops = std::chrono::seconds(10);
    BATON_ASSIGN_OR_RETURN(auto runtime, MakeRuntime(config));
    return std::make_unique<Engine>(nullptr, std::move(broker), std::move(runtime),
                                    std::make_unique<SystemClock>(), NewThreadTimers(), worker);
  }
  if (config.datastore_type != "postgres") {
    return FailedPrecondition(
        "datastore.type: `baton run coordinator` needs datastore.type = \"postgres\" (set "
        "datastore.postgres.dsn)");
  }
  PostgresOptions pg;
  pg.dsn = config.postgres_dsn;
  pg.max_job_bytes = config.datastore_max_job_bytes;
  // Several coordinators share the database, so the key cannot be made by one of them.
  BATON_ASSIGN_OR_RETURN(pg.keyring, KeyringFor(config, /*default_file=*/false, /*create=*/false));
  if (!pg.keyring) {
    log::Warn(
        "Secrets are stored unencrypted: set datastore.encryption.key or "
        "datastore.encryption.key_file (the same on every coordinator) to encrypt them.");
  }
  BATON_ASSIGN_OR_RETURN(auto datastore, PostgresDatastore::Open(pg));
  CoordinatorOptions coordinator;
  coordinator.lease = config.coordinator_lease;
  coordinator.timeout_grace = config.coordinator_timeout_grace;
  coordinator.lease_check_interval =
      std::min(config.coordinator_lease / 2, coordinator.lease_check_interval);
  // RabbitMQ keeps published messages: re-publishing SCHEDULED tasks would run them twice.
  coordinator.scheduler.durable_broker = true;
  // Several coordinators may share the datastore: each job's steps under its advisory lock.
  auto locker = std::make_unique<PostgresLocker>(config.postgres_dsn);
  coordinator.scheduler.job_locker = locker.get();
  coordinator.scheduler.max_redeliveries = config.coordinator_max_redeliveries;
  coordinator.scheduler.max_loop_iterations = config.coordinator_max_loop_iterations;
  coordinator.scheduler.node_lease = config.coordinator_lease;
  coordinator.scheduler.start_in_background = true;
  coordinator.auto_delete_interval = config.auto_delete_interval;
  coordinator.schedules = config.schedules;
  coordinator.webhooks = config.webhooks;
  BATON_ASSIGN_OR_RETURN(coordinator.webhooks.secret, WebhookKeyFor(config, /*make_file=*/false));
  coordinator.log_retention = config.log_retention;
  coordinator.job_retention = config.job_retention;
  coordinator.node_id = NewId();
  // The others' decisions reach this coordinator's GET /events streams (and its own
  // theirs) over RabbitMQ, while a stream is open somewhere.
  coordinator.share_events = true;
  coordinator.hostname = HostName();
  coordinator.version = Version();
  auto engine = std::make_unique<Engine>(std::move(datastore), std::move(broker), nullptr,
                                         std::make_unique<SystemClock>(), NewThreadTimers(), worker,
                                         coordinator);
  engine->locker_ = std::move(locker);
  engine->coordinator_node_id_ = coordinator.node_id;
  engine->trust_live_nodes_ = true;
  return engine;
}

Result<int> Engine::Migrate(const Config& given) {
  // A library caller may pass a relative data_dir: resolved here as LoadConfig does.
  Config config = given;
  BATON_RETURN_IF_ERROR(MakePathsAbsolute(config));
  if (config.datastore_type == "postgres") {
    PostgresOptions pg;
    pg.dsn = config.postgres_dsn;
    pg.auto_migrate = false;
    BATON_ASSIGN_OR_RETURN(auto datastore, PostgresDatastore::Open(pg));
    BATON_RETURN_IF_ERROR(datastore->Migrate());
    return datastore->SchemaVersion();
  }
  SqliteOptions sqlite;
  sqlite.path = SqlitePath(config);
  sqlite.auto_migrate = false;
  BATON_ASSIGN_OR_RETURN(auto datastore, SqliteDatastore::Open(sqlite));
  BATON_RETURN_IF_ERROR(datastore->Migrate());
  return datastore->SchemaVersion();
}

Engine::Engine(std::unique_ptr<Datastore> datastore, std::unique_ptr<Broker> broker,
               std::unique_ptr<Runtime> runtime, std::unique_ptr<Clock> clock,
               std::unique_ptr<Timers> timers, WorkerOptions worker_options,
               CoordinatorOptions coordinator_options)
    : datastore_(std::move(datastore)),
      broker_(std::move(broker)),
      runtime_(std::move(runtime)),
      clock_(std::move(clock)),
      timers_(std::move(timers)) {
  if (runtime_) {
    worker_ = std::make_unique<Worker>(*broker_, *runtime_, *clock_, std::move(worker_options));
  }
  lease_ = coordinator_options.lease;
  if (datastore_) {
    webhook_sender_ = std::make_unique<CurlWebhookSender>(AddressPolicy(
        coordinator_options.webhooks.allow_private, coordinator_options.webhooks.allowed_networks));
    coordinator_options.webhook_sender = webhook_sender_.get();
    coordinator_ = std::make_unique<Coordinator>(*datastore_, *broker_, *clock_, *timers_,
                                                 coordinator_options);
  }
}

Engine::~Engine() { Stop(std::chrono::milliseconds(0)); }

bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

Status Engine::BootstrapAdmin(const Config& config) {
  if (config.api_auth_admin_password.empty()) return Status::Ok();
  const std::string& name = config.api_auth_admin_user;
  Result<UserRecord> existing = datastore_->GetUser(name);
  if (existing.ok()) return Status::Ok();  // its password is the one it was created with
  if (existing.status().code() != StatusCode::kNotFound) return existing.status();
  UserRecord admin;
  admin.id = NewId();
  admin.username = name;
  admin.name = "Administrator";
  admin.roles = {std::string(kAdminRole)};
  admin.created_at = Now();
  Result<std::string> hash =
      auth::HashPassword(config.api_auth_admin_password, config.api_auth_bcrypt_cost);
  if (!hash.ok()) return InvalidArgument("api.auth.admin_password: " + hash.status().message());
  admin.password_hash = std::move(*hash);
  Status created = datastore_->CreateUser(admin);
  // Another coordinator may have created it meanwhile: as good.
  if (!created.ok() && created.code() != StatusCode::kAlreadyExists) return created;
  if (created.ok()) {
    log::Info("created the first admin user from api.auth.admin_password", {{"user", name}});
  }
  return Status::Ok();
}

Status Engine::ServeApi(const std::string& address, const std::string& version,
                        const Config& config) {
  if (!coordinator_) return FailedPrecondition("only a coordinator serves the API");
  BATON_ASSIGN_OR_RETURN(auto parsed, api::ParseAddress(address));
  api::ApiOptions options;
  options.version = version;
  options.lease = lease_;
  options.max_waits = config.api_max_waits;
  options.max_document_bytes = config.api_max_document_bytes;
  options.max_loop_iterations = config.coordinator_max_loop_iterations;
  options.max_body_bytes = config.api_max_body_bytes;
  options.cors.enabled = config.cors_enabled;
  options.cors.origins = config.cors_origins;
  options.cors.methods = config.cors_methods;
  options.cors.headers = config.cors_headers;
  options.cors.credentials = config.cors_credentials;
  options.rate_limit_rps = config.rate_limit_enabled ? config.rate_limit_rps : 0;
  options.auth.enabled = config.AuthEnabled();
  options.auth.bcrypt_cost = config.api_auth_bcrypt_cost;
  BATON_RETURN_IF_ERROR(BootstrapAdmin(config));
  if (!options.auth.enabled && !IsLoopbackHost(parsed.first)) {
    log::Warn(
        "AUTHENTICATION IS OFF on an API that listens beyond this host: anyone who reaches it "
        "can run commands here through jobs. Set api.auth.enabled = true (docs/auth.md), or "
        "listen on localhost",
        {{"address", address}});
  }
  api_ = std::make_unique<api::Api>(*coordinator_, *datastore_, *broker_, options);
  server_ = std::make_unique<api::Server>(
      *api_,
      api::ServerOptions{.host = parsed.first,
                         .port = parsed.second,
                         .max_connections = config.api_max_connections,
                         .handler_threads = config.api_handler_threads,
                         .max_buffered_bytes = config.api_max_buffered_bytes,
                         .keep_alive = config.api_keep_alive,
                         .request_timeout = config.api_request_timeout,
                         .tls_cert = config.api_tls_cert,
                         .tls_key = config.api_tls_key},
      options.max_body_bytes);
  return server_->Bind();
}

Status Engine::Start() {
  // The worker first: it kills what an earlier, killed run of this process left running
  // (Worker::Start) before the coordinator re-queues those tasks as new attempts.
  if (worker_) BATON_RETURN_IF_ERROR(worker_->Start());
  if (coordinator_) {
    std::set<std::string> live;
    if (worker_) live.insert(worker_->node_id());
    if (trust_live_nodes_) {
      // Every node keeps its RUNNING tasks for now: the lease checks, from one lease after
      // the start, re-queue those of nodes that stay silent.
      BATON_ASSIGN_OR_RETURN(auto nodes, datastore_->ActiveNodes(TimePoint{}));
      for (const NodeRecord& node : nodes) live.insert(node.id);
    }
    // Standalone: only this process's worker is alive, so RUNNING tasks of any other node
    // (an earlier run of this process) are re-run as new attempts.
    BATON_RETURN_IF_ERROR(coordinator_->Start(live));
  }
  if (server_) BATON_RETURN_IF_ERROR(server_->Start());
  trimmer_.Start();
  started_ = true;
  return Status::Ok();
}

void Engine::Stop(std::chrono::milliseconds grace) {
  if (server_) server_->Stop();
  if (worker_) worker_->Stop(grace);
  if (coordinator_) coordinator_->Stop();
  trimmer_.Stop();
  started_ = false;
}

Result<JobRecord> Engine::Submit(const Job& job) {
  if (!coordinator_) return FailedPrecondition("a worker does not take jobs");
  return coordinator_->Submit(job);
}

Result<JobRecord> Engine::Wait(const std::string& job_id, std::chrono::milliseconds timeout) {
  return coordinator_->Wait(job_id, timeout);
}

Status Engine::Cancel(const std::string& job_id) { return coordinator_->Cancel(job_id); }

Status Engine::Restart(const std::string& job_id) { return coordinator_->Restart(job_id); }

}  // namespace baton
