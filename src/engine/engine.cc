#include "engine/engine.h"

#include <fmt/format.h>

#include <filesystem>
#include <thread>

#include "base/log.h"
#include "broker/inmemory/inmemory_broker.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "runtime/shell/shell_runtime.h"

namespace baton {

Result<std::unique_ptr<Engine>> Engine::Standalone(const Config& config) {
  if (config.broker_type != "inmemory") {
    return FailedPrecondition("broker.type: standalone uses the in-memory broker; rabbitmq is "
                              "for `baton run coordinator` / `baton run worker`");
  }
  if (config.datastore_type != "sqlite") {
    return FailedPrecondition("datastore.type: only sqlite is available in this version");
  }
  if (config.runtime_type == "docker") {
    return FailedPrecondition("runtime.type: the docker runtime is not available in this version");
  }
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    return FailedPrecondition(
        fmt::format("cannot create the data directory {}: {}", config.data_dir, ec.message()));
  }
  SqliteOptions sqlite;
  sqlite.path = config.sqlite_path.empty() ? config.data_dir + "/baton.db" : config.sqlite_path;
  auto datastore = SqliteDatastore::Open(sqlite);
  if (!datastore.ok()) return datastore.status();

  ShellRuntimeOptions shell;
  shell.base_dir = config.data_dir + "/tasks";
  WorkerOptions worker;
  worker.name = "standalone";
  worker.queues = config.worker_queues;
  if (worker.queues.empty()) {
    worker.queues = {{"default", static_cast<int>(std::max(1U, std::thread::hardware_concurrency()))}};
  }
  return std::make_unique<Engine>(std::move(*datastore), std::make_unique<InMemoryBroker>(),
                                  std::make_unique<ShellRuntime>(shell),
                                  std::make_unique<SystemClock>(), NewThreadTimers(), worker);
}

Result<int> Engine::Migrate(const Config& config) {
  if (config.datastore_type != "sqlite") {
    return FailedPrecondition("datastore.type: only sqlite is available in this version");
  }
  SqliteOptions sqlite;
  sqlite.path = config.sqlite_path.empty() ? config.data_dir + "/baton.db" : config.sqlite_path;
  sqlite.auto_migrate = false;
  auto datastore = SqliteDatastore::Open(sqlite);
  if (!datastore.ok()) return datastore.status();
  BATON_RETURN_IF_ERROR((*datastore)->Migrate());
  return (*datastore)->SchemaVersion();
}

Engine::Engine(std::unique_ptr<Datastore> datastore, std::unique_ptr<Broker> broker,
               std::unique_ptr<Runtime> runtime, std::unique_ptr<Clock> clock,
               std::unique_ptr<Timers> timers, WorkerOptions worker_options)
    : datastore_(std::move(datastore)),
      broker_(std::move(broker)),
      runtime_(std::move(runtime)),
      clock_(std::move(clock)),
      timers_(std::move(timers)) {
  worker_ = std::make_unique<Worker>(*broker_, *runtime_, *clock_, std::move(worker_options));
  coordinator_ = std::make_unique<Coordinator>(*datastore_, *broker_, *clock_, *timers_);
}

Engine::~Engine() { Stop(std::chrono::milliseconds(0)); }

Status Engine::ServeApi(const std::string& address, const std::string& version) {
  auto parsed = api::ParseAddress(address);
  if (!parsed.ok()) return parsed.status();
  api::ApiOptions options;
  options.version = version;
  api_ = std::make_unique<api::Api>(*coordinator_, *datastore_, *broker_, options);
  server_ = std::make_unique<api::Server>(
      *api_, api::ServerOptions{.host = parsed->first, .port = parsed->second},
      options.max_body_bytes);
  return Status::Ok();
}

Status Engine::Start() {
  BATON_RETURN_IF_ERROR(worker_->Start());
  // Only this process's worker is alive: RUNNING tasks of any other node (an earlier
  // run of this process) are re-run as new attempts.
  BATON_RETURN_IF_ERROR(coordinator_->Start({worker_->node_id()}));
  if (server_) BATON_RETURN_IF_ERROR(server_->Start());
  started_ = true;
  return Status::Ok();
}

void Engine::Stop(std::chrono::milliseconds grace) {
  if (!worker_) return;
  if (server_) server_->Stop();
  worker_->Stop(grace);
  coordinator_->Stop();
  started_ = false;
}

Result<JobRecord> Engine::Submit(const Job& job) { return coordinator_->Submit(job); }

Result<JobRecord> Engine::Wait(const std::string& job_id, std::chrono::milliseconds timeout) {
  return coordinator_->Wait(job_id, timeout);
}

Status Engine::Cancel(const std::string& job_id) { return coordinator_->Cancel(job_id); }

Status Engine::Restart(const std::string& job_id) { return coordinator_->Restart(job_id); }

}  // namespace baton
