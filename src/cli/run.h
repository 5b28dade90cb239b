// `baton run ROLE` and `baton migrate`: the server side of the baton command.
#pragma once

#include <string>

namespace baton::cli {

struct ServerFlags {
  std::string config_file;
  std::string address;   // empty: from configuration
  std::string data_dir;  // empty: from configuration
  std::string queues;    // "name:concurrency,..." from repeated --queue; empty: configuration
};

// Runs the role until SIGINT or SIGTERM, then stops gracefully. Returns an exit code.
int RunServer(const std::string& role, const ServerFlags& flags);
int Migrate(const ServerFlags& flags);
// `baton secrets rotate`: every stored secret re-encrypted under the primary key.
int RotateSecrets(const ServerFlags& flags, int batch);

}  // namespace baton::cli
