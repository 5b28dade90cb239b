// The baton command: server, worker and client in one binary.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/run.h"
#include "cli/validate.h"

namespace {

constexpr const char* kVersion = BATON_VERSION;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Baton: a distributed workflow engine for shell and container tasks", "baton"};
  app.require_subcommand(1);

  auto* version = app.add_subcommand("version", "Print the version");

  std::vector<std::string> files;
  auto* validate = app.add_subcommand("validate", "Check job files (YAML or JSON) offline");
  validate->add_option("files", files, "Job files; - reads standard input")->required();

  std::string role;
  auto* run = app.add_subcommand("run", "Run a server role");
  run->add_option("role", role, "standalone, coordinator or worker")
      ->required()
      ->check(CLI::IsMember({"standalone", "coordinator", "worker"}));
  baton::cli::ServerFlags flags;
  auto add_server_flags = [&](CLI::App* command) {
    command->add_option("--config", flags.config_file, "Configuration file (TOML)");
    command->add_option("--data-dir", flags.data_dir, "Data directory (default ./.baton)");
  };
  add_server_flags(run);
  run->add_option("--address", flags.address, "HOST:PORT the API listens on (default localhost:8000)");

  auto* migrate = app.add_subcommand("migrate", "Create or upgrade the datastore schema");
  add_server_flags(migrate);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return baton::cli::kExitUsage;
  }

  if (version->parsed()) {
    std::cout << "baton " << kVersion << '\n';
    return baton::cli::kExitOk;
  }
  if (validate->parsed()) return baton::cli::Validate(files, std::cout, std::cerr);
  if (run->parsed()) return baton::cli::RunServer(role, flags);
  if (migrate->parsed()) return baton::cli::Migrate(flags);
  return baton::cli::kExitUsage;
}
