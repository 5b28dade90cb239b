// The baton command: server, worker and client in one binary.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "cli/client.h"
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
  bool plan = false;
  bool plan_json = false;
  std::string plan_format = "text";
  validate->add_flag("--plan", plan,
                     "Print each valid job's execution plan: stages, needs, trigger rules and "
                     "what each task's failure skips");
  validate->add_option("--format", plan_format, "The plan as text, dot (Graphviz) or json")
      ->check(CLI::IsMember({"text", "dot", "json"}));
  validate->add_flag("--json", plan_json, "The plan as JSON (--plan --format json)");

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
  run->add_option("--address", flags.address,
                  "HOST:PORT the API listens on (default localhost:8000)");
  std::vector<std::string> queue_flags;
  run->add_option("--queue", queue_flags,
                  "NAME:CONCURRENCY a worker consumes (repeatable; default default:<cores>)");

  auto* migrate = app.add_subcommand("migrate", "Create or upgrade the datastore schema");
  add_server_flags(migrate);

  auto* secrets = app.add_subcommand("secrets", "Manage the encryption of stored secrets");
  secrets->require_subcommand(1);
  int rotate_batch = 100;
  auto* secrets_rotate = secrets->add_subcommand(
      "rotate", "Re-encrypt every stored secret under the primary key (docs/security.md)");
  add_server_flags(secrets_rotate);
  secrets_rotate->add_option("--batch", rotate_batch, "Rows per transaction (default 100)")
      ->check(CLI::Range(1, 10000));

  // The client commands. Every one takes --url (BATON_URL), --cacert (BATON_CACERT) and
  // --json.
  baton::cli::ClientOptions client;
  auto add_client_flags = [&](CLI::App* command) {
    command->add_option("--url", client.url, "API address (default http://localhost:8000)")
        ->envname("BATON_URL");
    command
        ->add_option("--cacert", client.cacert,
                     "CA certificate(s) (PEM) to trust for an https --url")
        ->envname("BATON_CACERT");
    command->add_flag("--json", client.json, "Print the server's JSON");
    command->add_option("--user", client.user, "Credentials NAME:PASSWORD (HTTP basic)")
        ->envname("BATON_USER");
    command->add_option("--token", client.token, "An API key (sent as a bearer token)")
        ->envname("BATON_TOKEN");
  };

  baton::cli::SubmitOptions submit_options;
  auto* submit = app.add_subcommand("submit", "Submit a job file (YAML or JSON); print its id");
  submit->add_option("file", submit_options.file, "Job file; - reads standard input")->required();
  submit->add_option("-i,--input", submit_options.inputs, "Set inputs.KEY (KEY=VALUE), repeatable")
      ->allow_extra_args(false);
  submit->add_flag("--wait", submit_options.wait,
                   "Wait for the job to end; print its state and result");
  submit->add_flag("--follow", submit_options.follow,
                   "Stream the job's log and progress until it ends");
  submit->add_option("--schedule", submit_options.schedule,
                     "Make it a scheduled job fired on this 5-field cron (e.g. \"0 * * * *\")");
  submit->add_option("--timezone", submit_options.timezone,
                     "IANA time zone of --schedule (default UTC)");
  add_client_flags(submit);

  auto* jobs = app.add_subcommand("jobs", "List and manage jobs");
  jobs->require_subcommand(1);
  std::string job_id;
  std::string query;
  baton::cli::PageOptions page;
  auto add_page_flags = [&](CLI::App* command) {
    command->add_option("--page", page.page, "Page number, from 1");
    command->add_option("--size", page.size, "Items per page, 1..100");
  };
  auto* jobs_list = jobs->add_subcommand("list", "List jobs, newest first");
  jobs_list->add_option("-q,--query", query, "Words matched against name/description/state, tag:x");
  add_page_flags(jobs_list);
  add_client_flags(jobs_list);
  auto add_id_command = [&](const char* name, const char* help) {
    auto* command = jobs->add_subcommand(name, help);
    command->add_option("id", job_id, "Job id")->required();
    add_client_flags(command);
    return command;
  };
  auto* jobs_get = add_id_command("get", "Show a job and its tasks");
  auto* jobs_cancel = add_id_command("cancel", "Cancel a pending, running or paused job");
  auto* jobs_restart = add_id_command("restart", "Restart a failed or cancelled job");
  auto* jobs_pause =
      add_id_command("pause", "Pause a running job: its running tasks finish, nothing new starts");
  auto* jobs_resume = add_id_command("resume", "Resume a paused job");
  baton::cli::RerunOptions rerun;
  auto* jobs_rerun = add_id_command(
      "rerun", "Run a finished job again: its failed tasks, from the failed one, or all");
  jobs_rerun
      ->add_option("--mode", rerun.mode,
                   "failed_only (default), from_failed or all: which of its tasks run again")
      ->check(CLI::IsMember({"failed_only", "from_failed", "all"}));
  jobs_rerun->add_option("--from", rerun.from, "With --mode all: from this top-level task on");
  jobs_rerun->add_option("--input", rerun.inputs, "NAME=VALUE: a new value of an input");
  std::string signal_name;
  std::string signal_payload;
  auto* jobs_signal = add_id_command(
      "signal", "Send a signal to a job: its tasks waiting for it complete with the payload");
  jobs_signal->add_option("name", signal_name, "The signal's name")->required();
  jobs_signal->add_option("--payload", signal_payload,
                          "JSON: the waiting tasks' result (a string in quotes; none: \"\")");
  auto* jobs_log = add_id_command("log", "Print a job's log, oldest first");
  add_page_flags(jobs_log);

  auto* schedules = app.add_subcommand("schedules", "List and manage scheduled jobs");
  schedules->require_subcommand(1);
  std::string schedule_id;
  auto* schedules_list = schedules->add_subcommand("list", "List scheduled jobs, newest first");
  add_page_flags(schedules_list);
  add_client_flags(schedules_list);
  auto add_schedule_command = [&](const char* name, const char* help) {
    auto* command = schedules->add_subcommand(name, help);
    command->add_option("id", schedule_id, "Scheduled job id")->required();
    add_client_flags(command);
    return command;
  };
  auto* schedules_get = add_schedule_command("get", "Show a scheduled job");
  auto* schedules_pause = add_schedule_command("pause", "Pause an active scheduled job");
  auto* schedules_resume = add_schedule_command("resume", "Resume a paused scheduled job");
  auto* schedules_delete =
      add_schedule_command("delete", "Delete a scheduled job (the jobs it fired stay)");

  auto* health = app.add_subcommand("health", "Check that the server is up");
  add_client_flags(health);

  auto* users = app.add_subcommand("users", "Manage users (needs an admin's credentials)");
  users->require_subcommand(1);
  baton::cli::NewUser new_user;
  bool new_admin = false;
  bool password_stdin = false;
  auto* users_create = users->add_subcommand("create", "Create a user");
  users_create->add_option("username", new_user.username, "The user's login name")->required();
  users_create->add_option("--name", new_user.name, "The user's full name");
  users_create->add_option("--role", new_user.roles, "A role (repeatable)");
  users_create->add_flag("--admin", new_admin, "Give the admin role");
  users_create->add_flag("--password-stdin", password_stdin,
                         "Read the password from standard input (else BATON_NEW_PASSWORD)");
  add_client_flags(users_create);

  auto* keys = app.add_subcommand("keys", "Manage API keys");
  keys->require_subcommand(1);
  std::string key_name, key_user, key_id;
  auto* keys_create = keys->add_subcommand("create", "Create an API key; print it once");
  keys_create->add_option("--name", key_name, "What the key is for");
  keys_create->add_option("--for", key_user, "Another user's key (admins only)");
  add_client_flags(keys_create);
  auto* keys_list = keys->add_subcommand("list", "List API keys (never the keys themselves)");
  keys_list->add_option("--for", key_user, "Another user's keys (admins only)");
  add_client_flags(keys_list);
  auto* keys_revoke = keys->add_subcommand("revoke", "Revoke an API key");
  keys_revoke->add_option("id", key_id, "The key's id")->required();
  add_client_flags(keys_revoke);

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
  if (validate->parsed()) {
    using baton::cli::PlanFormat;
    PlanFormat format = PlanFormat::kNone;
    if (plan_json || plan_format == "json") {
      format = PlanFormat::kJson;
    } else if (plan_format == "dot") {
      format = PlanFormat::kDot;
    } else if (plan) {
      format = PlanFormat::kText;
    }
    return baton::cli::Validate(files, std::cout, std::cerr, format);
  }
  if (run->parsed()) {
    for (const std::string& q : queue_flags) flags.queues += (flags.queues.empty() ? "" : ",") + q;
    return baton::cli::RunServer(role, flags);
  }
  if (migrate->parsed()) return baton::cli::Migrate(flags);
  if (secrets_rotate->parsed()) return baton::cli::RotateSecrets(flags, rotate_batch);

  using std::cerr, std::cout;
  if (submit->parsed()) {
    submit_options.tty = isatty(STDOUT_FILENO) == 1;
    return baton::cli::Submit(client, submit_options, cout, cerr);
  }
  if (jobs_list->parsed()) return baton::cli::ListJobs(client, query, page, cout, cerr);
  if (jobs_get->parsed()) return baton::cli::GetJob(client, job_id, cout, cerr);
  if (jobs_cancel->parsed()) return baton::cli::CancelJob(client, job_id, cout, cerr);
  if (jobs_restart->parsed()) return baton::cli::RestartJob(client, job_id, cout, cerr);
  if (jobs_pause->parsed()) return baton::cli::PauseJob(client, job_id, cout, cerr);
  if (jobs_resume->parsed()) return baton::cli::ResumeJob(client, job_id, cout, cerr);
  if (jobs_rerun->parsed()) return baton::cli::RerunJob(client, job_id, rerun, cout, cerr);
  if (jobs_signal->parsed()) {
    return baton::cli::SignalJob(client, job_id, signal_name, signal_payload, cout, cerr);
  }
  if (jobs_log->parsed()) return baton::cli::JobLog(client, job_id, page, cout, cerr);
  if (schedules_list->parsed()) return baton::cli::ListSchedules(client, page, cout, cerr);
  if (schedules_get->parsed()) return baton::cli::GetSchedule(client, schedule_id, cout, cerr);
  if (schedules_pause->parsed()) return baton::cli::PauseSchedule(client, schedule_id, cout, cerr);
  if (schedules_resume->parsed()) {
    return baton::cli::ResumeSchedule(client, schedule_id, cout, cerr);
  }
  if (schedules_delete->parsed()) {
    return baton::cli::DeleteSchedule(client, schedule_id, cout, cerr);
  }
  if (health->parsed()) return baton::cli::Health(client, cout, cerr);
  if (users_create->parsed()) {
    if (new_admin) new_user.roles.emplace_back("admin");
    if (password_stdin) {
      std::getline(std::cin, new_user.password);
      if (!new_user.password.empty() && new_user.password.back() == '\r') {
        new_user.password.pop_back();
      }
    } else if (const char* env = std::getenv("BATON_NEW_PASSWORD"); env != nullptr) {
      new_user.password = env;
    }
    return baton::cli::CreateUser(client, new_user, cout, cerr);
  }
  if (keys_create->parsed()) return baton::cli::CreateKey(client, key_name, key_user, cout, cerr);
  if (keys_list->parsed()) return baton::cli::ListKeys(client, key_user, cout, cerr);
  if (keys_revoke->parsed()) return baton::cli::RevokeKey(client, key_id, cout, cerr);
  return baton::cli::kExitUsage;
}
