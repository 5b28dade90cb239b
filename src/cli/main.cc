// The baton command: server, worker and client in one binary.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/validate.h"

namespace {

constexpr const char* kVersion = BATON_VERSION;

int NotBuiltYet(const std::string& what) {
  std::cerr << fmt::format(
      "baton {}: the engine is not built yet in this version ({}); "
      "`baton validate` and `baton version` work today.\n",
      what, kVersion);
  return baton::cli::kExitFailure;
}

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
  std::string config, address, data_dir;
  run->add_option("--config", config, "Configuration file (TOML)");
  run->add_option("--address", address, "HOST:PORT the API listens on")
      ->default_str("localhost:8000");
  run->add_option("--data-dir", data_dir, "Data directory")->default_str("./.baton");

  auto* migrate = app.add_subcommand("migrate", "Create or upgrade the datastore schema");

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
  if (run->parsed()) return NotBuiltYet("run " + role);
  if (migrate->parsed()) return NotBuiltYet("migrate");
  return baton::cli::kExitUsage;
}
