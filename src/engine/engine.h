// The composition root: the only place that names concrete implementations. An Engine
// is a coordinator and a worker over one broker, datastore and runtime — `baton run
// standalone` — and offers the in-process API the REST API will sit on.
//
// Thread-safety: Submit/Wait/Cancel/Restart may be called from any thread; Start and
// Stop from one.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "api/api.h"
#include "api/server.h"
#include "base/clock.h"
#include "broker/broker.h"
#include "coordinator/coordinator.h"
#include "datastore/datastore.h"
#include "datastore/rotation.h"
#include "engine/config.h"
#include "engine/memory_trim.h"
#include "runtime/runtime.h"
#include "worker/worker.h"

namespace baton {

class Engine {
 public:
  // Builds the standalone engine from configuration: in-memory broker, SQLite in the
  // data directory, the shell runtime.
  static Result<std::unique_ptr<Engine>> Standalone(const Config& config);

  // Builds a distributed role from configuration (RabbitMQ broker; PostgreSQL datastore):
  // "coordinator" (scheduler, reconciler, leases and the API; no worker) or "worker"
  // (runs tasks; no datastore).
  static Result<std::unique_ptr<Engine>> Distributed(const Config& config, const std::string& role);

  // Creates or upgrades the configured datastore's schema; returns the schema version.
  static Result<int> Migrate(const Config& config);

  // `baton secrets rotate`: re-encrypts every stored secret of the configured datastore
  // under the primary key (datastore/rotation.h), `batch` rows per transaction;
  // `progress` is called after each batch. kFailedPrecondition when no key is configured
  // (SQLite's default key file counts only if it exists).
  static Result<RotationReport> RotateSecrets(
      const Config& config, int batch,
      const std::function<void(SecretTable, const RotationReport&)>& progress = {});

  // Composes an engine from given parts (tests). Without a runtime there is no worker;
  // without a datastore there is no coordinator.
  Engine(std::unique_ptr<Datastore> datastore, std::unique_ptr<Broker> broker,
         std::unique_ptr<Runtime> runtime, std::unique_ptr<Clock> clock,
         std::unique_ptr<Timers> timers, WorkerOptions worker_options,
         CoordinatorOptions coordinator_options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Takes `address` ("HOST:PORT"; port 0 picks a free one) now, so a taken address fails
  // here, before Start touches any job, and serves the REST API there from Start.
  // `config` gives the api.* limits.
  // With api.auth.admin_password set, first creates that admin user when none of its
  // name exists; with authentication off on a host other than loopback, logs a loud
  // warning.
  Status ServeApi(const std::string& address, const std::string& version,
                  const Config& config = {});

  // Starts the worker and the coordinator, which reconciles unfinished jobs, then the
  // API if one was asked for.
  Status Start();
  // Stops taking work; running tasks get `grace` to finish, then are cancelled.
  void Stop(std::chrono::milliseconds grace);

  Result<JobRecord> Submit(const Job& job);
  Result<JobRecord> Wait(const std::string& job_id, std::chrono::milliseconds timeout);
  Status Cancel(const std::string& job_id);
  Status Restart(const std::string& job_id);

  Datastore& datastore() { return *datastore_; }
  Broker& broker() { return *broker_; }
  // The worker's node id, else the coordinator's (several coordinators); else empty.
  std::string node_id() const { return worker_ ? worker_->node_id() : coordinator_node_id_; }
  // The port the API listens on, once started (0 without an API).
  int api_port() const { return server_ ? server_->port() : 0; }

 private:
  Status BootstrapAdmin(const Config& config);
  std::unique_ptr<Datastore> datastore_;
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<Clock> clock_;
  // The job locks of several coordinators (distributed); outlives the coordinator.
  std::unique_ptr<Locker> locker_;
  std::unique_ptr<Worker> worker_;
  // Before the coordinator, whose webhook deliverer uses it.
  std::unique_ptr<WebhookSender> webhook_sender_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<api::Api> api_;
  std::unique_ptr<api::Server> server_;
  // Gives glibc's freed memory back after a burst of frees (a big job's end), between
  // Start and Stop.
  MemoryTrimmer trimmer_;
  // Declared last, so destroyed first: its thread is joined (no callback runs any more)
  // before the coordinator and worker its callbacks use go away.
  std::unique_ptr<Timers> timers_;
  // Nodes whose RUNNING tasks stay theirs at start: standalone, its own worker; a
  // coordinator, every known node (the lease checks judge them once it has run a lease).
  bool trust_live_nodes_ = false;
  std::chrono::milliseconds lease_{std::chrono::seconds(30)};
  std::string coordinator_node_id_;
  bool started_ = false;
};

// Whether the API listening on `host` is reachable from this host only (localhost,
// 127.0.0.0/8, ::1).
bool IsLoopbackHost(std::string_view host);

}  // namespace baton
