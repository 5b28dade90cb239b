// The client commands of `baton`: submit a job and drive the REST API from the shell
// (`baton submit`, `baton jobs ...`, `baton health`). Each command talks to one server
// over HTTP or HTTPS (http/client.h), prints a human-readable view (or the server's JSON
// with `json`), and returns an exit code: kExitOk, kExitFailure (the server said no, the
// job did not complete, the server cannot be reached) or kExitUsage (bad arguments, an
// unreadable file).
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace baton::cli {

inline constexpr const char* kDefaultUrl = "http://localhost:8000";

struct ClientOptions {
  std::string url = kDefaultUrl;  // http(s)://host[:port] of the API
  // With an https URL: a PEM file of the CA(s) the server's certificate must chain to
  // (--cacert, BATON_CACERT), for a private CA or a self-signed certificate; empty: the
  // system's trust store.
  std::string cacert;
  bool json = false;  // print the server's JSON instead of tables
  // How often `--wait` and `--follow` poll: the first delay, growing by half each time up
  // to the maximum, so short jobs finish fast and long ones do not hammer the server.
  std::chrono::milliseconds poll_initial{50};
  std::chrono::milliseconds poll_max{1000};
  std::chrono::seconds request_timeout{30};
  // Credentials sent with every request (docs/auth.md): `token` an API key (Authorization:
  // Bearer; --token, BATON_TOKEN), else `user` as NAME:PASSWORD (HTTP basic; --user,
  // BATON_USER). Neither: none sent.
  std::string user;
  std::string token;
};

struct NewUser {
  std::string username;
  std::string name;
  std::string password;
  std::vector<std::string> roles;  // --role, repeatable; --admin adds "admin"
};

struct SubmitOptions {
  std::string file;                 // "-" reads standard input
  std::vector<std::string> inputs;  // "key=value", each setting `inputs.key`
  bool wait = false;
  bool follow = false;
  bool tty = false;  // `--follow` draws a live progress line with "\r" on a terminal
  // `--schedule CRON [--timezone ZONE]`: the job becomes a scheduled job (POST
  // /scheduled-jobs) instead of running once; prints the scheduled job's id.
  std::string schedule;
  std::string timezone;
};

struct PageOptions {
  std::optional<int> page;
  std::optional<int> size;
};

// `baton submit FILE [-i k=v]... [--wait] [--follow]`. Prints the job id; with `wait` or
// `follow`, also the final state and the result (or error), and succeeds only when the job
// COMPLETED.
int Submit(const ClientOptions& options, const SubmitOptions& submit, std::ostream& out,
           std::ostream& err);

// `baton jobs list [-q QUERY] [--page N] [--size N]`.
int ListJobs(const ClientOptions& options, const std::string& query, const PageOptions& page,
             std::ostream& out, std::ostream& err);

// `baton jobs get ID`: the job and a table of its task rows.
int GetJob(const ClientOptions& options, const std::string& id, std::ostream& out,
           std::ostream& err);

// `baton jobs cancel ID` / `baton jobs restart ID`.
int CancelJob(const ClientOptions& options, const std::string& id, std::ostream& out,
              std::ostream& err);
int RestartJob(const ClientOptions& options, const std::string& id, std::ostream& out,
               std::ostream& err);
// `baton jobs rerun ID [--mode M] [--from TASK] [--input NAME=VALUE]...`: PUT
// /jobs/{id}/rerun; "job ID runs again", or the server's reason.
struct RerunOptions {
  std::string mode;  // failed_only, from_failed or all; empty: the server's default
  std::string from;
  std::vector<std::string> inputs;  // NAME=VALUE each
};
int RerunJob(const ClientOptions& options, const std::string& id, const RerunOptions& rerun,
             std::ostream& out, std::ostream& err);
// `baton jobs signal ID NAME [--payload JSON]`: POST /jobs/{id}/signals/{name} with the
// payload (none: ""); "job ID signalled NAME", or the server's reason.
int SignalJob(const ClientOptions& options, const std::string& id, const std::string& name,
              const std::string& payload, std::ostream& out, std::ostream& err);
// PUT /jobs/{id}/pause and /resume: "job ID paused" / "job ID resumed", or the server's
// reason (a job in a state that refuses it).
int PauseJob(const ClientOptions& options, const std::string& id, std::ostream& out,
             std::ostream& err);
int ResumeJob(const ClientOptions& options, const std::string& id, std::ostream& out,
              std::ostream& err);

// `baton jobs log ID [--page N] [--size N]`: without a page, the whole log oldest first.
int JobLog(const ClientOptions& options, const std::string& id, const PageOptions& page,
           std::ostream& out, std::ostream& err);

// `baton schedules list [--page N] [--size N]`, `get ID`, `pause ID`, `resume ID`,
// `delete ID`: /scheduled-jobs from the shell.
int ListSchedules(const ClientOptions& options, const PageOptions& page, std::ostream& out,
                  std::ostream& err);
int GetSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                std::ostream& err);
int PauseSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                  std::ostream& err);
int ResumeSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                   std::ostream& err);
int DeleteSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                   std::ostream& err);

// `baton users create USERNAME [--name N] [--role R]... [--admin]` (POST /users; the
// password from --password-stdin or BATON_NEW_PASSWORD, never an argument).
int CreateUser(const ClientOptions& options, const NewUser& user, std::ostream& out,
               std::ostream& err);

// `baton keys create [--name N] [--for USER]`: prints the key id and the key, once.
int CreateKey(const ClientOptions& options, const std::string& name, const std::string& for_user,
              std::ostream& out, std::ostream& err);
// `baton keys list [--for USER]`: the caller's keys (an admin's: anyone's), never a key.
int ListKeys(const ClientOptions& options, const std::string& for_user, std::ostream& out,
             std::ostream& err);
// `baton keys revoke ID`.
int RevokeKey(const ClientOptions& options, const std::string& id, std::ostream& out,
              std::ostream& err);

// `baton health`: succeeds when the server answers UP.
int Health(const ClientOptions& options, std::ostream& out, std::ostream& err);

}  // namespace baton::cli
