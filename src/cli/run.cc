#include "cli/run.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>

#include "base/log.h"
#include "base/version.h"
#include "cli/validate.h"
#include "engine/config.h"
#include "engine/engine.h"

namespace baton::cli {
namespace {

Result<Config> Load(const ServerFlags& flags) {
  BATON_ASSIGN_OR_RETURN(Config config, LoadConfig(flags.config_file, [](const char* name) {
                           return std::getenv(name);
                         }));
  if (!flags.address.empty()) config.coordinator_address = flags.address;
  if (!flags.data_dir.empty()) {
    config.data_dir = flags.data_dir;
    Status absolute = MakePathsAbsolute(config);
    if (!absolute.ok()) return InvalidArgument("--data-dir: " + std::string(absolute.message()));
  }
  log::Configure(config.log_level, config.log_format);
  return config;
}

}  // namespace

int RunServer(const std::string& role, const ServerFlags& flags) {
  // Block the stop signals before any thread starts, so every thread inherits the mask
  // and the main thread alone receives them through sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto config = Load(flags);
  if (!config.ok()) {
    std::cerr << "baton: " << config.status().message() << '\n';
    return kExitUsage;
  }
  if (!flags.queues.empty()) {
    auto queues = ParseQueues(flags.queues);
    if (!queues.ok()) {
      std::cerr << "baton: --queue: " << queues.status().message() << '\n';
      return kExitUsage;
    }
    config->worker_queues = *queues;
  }
  auto engine =
      role == "standalone" ? Engine::Standalone(*config) : Engine::Distributed(*config, role);
  if (!engine.ok()) {
    std::cerr << "baton: " << engine.status().message() << '\n';
    return engine.status().code() == StatusCode::kFailedPrecondition ? kExitUsage : kExitFailure;
  }
  if (role != "worker") {
    // A taken address fails here with exit 2, before the engine starts.
    Status api = (*engine)->ServeApi(config->coordinator_address, Version(), *config);
    if (!api.ok()) {
      std::cerr << "baton: " << api.message() << '\n';
      return kExitUsage;
    }
  }
  Status started = (*engine)->Start();
  if (!started.ok()) {
    std::cerr << "baton: starting failed: " << started.message() << '\n';
    return kExitFailure;
  }
  log::Info(fmt::format("baton {} is running", role),
            {{"data_dir", config->data_dir}, {"node", (*engine)->node_id()}});
  int signal = 0;
  sigwait(&stop_signals, &signal);
  log::Info("stopping: running tasks get 30s to finish", {{"signal", strsignal(signal)}});
  (*engine)->Stop(std::chrono::seconds(30));
  return kExitOk;
}

int Migrate(const ServerFlags& flags) {
  auto config = Load(flags);
  if (!config.ok()) {
    std::cerr << "baton: " << config.status().message() << '\n';
    return kExitUsage;
  }
  auto version = Engine::Migrate(*config);
  if (!version.ok()) {
    std::cerr << "baton migrate: " << version.status().message() << '\n';
    return kExitFailure;
  }
  std::cout << fmt::format("schema is at version {}\n", *version);
  return kExitOk;
}

int RotateSecrets(const ServerFlags& flags, int batch) {
  auto config = Load(flags);
  if (!config.ok()) {
    std::cerr << "baton: " << config.status().message() << '\n';
    return kExitUsage;
  }
  auto name = [](SecretTable table) {
    return table == SecretTable::kJobs    ? "jobs"
           : table == SecretTable::kTasks ? "tasks"
                                          : "webhook_deliveries";
  };
  auto report =
      Engine::RotateSecrets(*config, batch, [&](SecretTable table, const RotationReport& so_far) {
        std::cout << fmt::format("{}: {} rows read, {} re-encrypted\n", name(table), so_far.read,
                                 so_far.rewritten);
      });
  if (!report.ok()) {
    std::cerr << "baton secrets rotate: " << report.status().message() << '\n';
    return kExitFailure;
  }
  std::cout << fmt::format(
      "done: {} rows read, {} re-encrypted; every stored secret is under the primary key\n",
      report->read, report->rewritten);
  return kExitOk;
}

}  // namespace baton::cli
