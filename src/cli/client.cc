#include "cli/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/url.h"
#include "cli/job_file.h"
#include "cli/validate.h"
#include "core/job_decode.h"
#include "core/job_json.h"
#include "core/names.h"
#include "core/states.h"
#include "http/client.h"

namespace baton::cli {
namespace {

using nlohmann::json;

// The largest page the API serves; listing a whole log takes as few requests as possible.
constexpr int kMaxPageSize = 100;
// Long enough for any `wait` a job file asks POST /jobs to block for; the server bounds it.
constexpr std::chrono::hours kSubmitReadTimeout{1};
// Table cells longer than this are cut, so one long result does not wreck the layout.
constexpr std::size_t kMaxCellWidth = 48;

// The responses the CLI reads are JSON pages of at most kMaxPageSize rows; anything far
// larger is not the API.
constexpr std::size_t kMaxResponseBytes = std::size_t{64} << 20;

struct Reply {
  int status = 0;
  std::string body;
  bool ok() const { return status >= 200 && status < 300; }
};

// One server of the API, over http/client.h. Requests that cannot reach the server print
// why to `err` and return nothing; the caller turns that into kExitFailure.
class Api {
 public:
  Api(const ClientOptions& options, std::ostream& err)
      : url_(Normalise(options.url)), options_(options), err_(err) {}

  // False (with a message) when the URL is not http(s)://host[:port].
  bool Valid() const {
    auto scheme = url_.find("://");
    std::string_view name =
        scheme == std::string::npos ? "" : std::string_view(url_).substr(0, scheme);
    std::size_t host = scheme == std::string::npos ? 0 : scheme + 3;
    if ((name == "http" || name == "https") && host < url_.size() &&
        url_.find_first_of("/?#", host) == std::string::npos) {
      return true;
    }
    err_ << fmt::format(
        "baton: invalid --url \"{}\": expected http://HOST:PORT or https://HOST:PORT\n", url_);
    return false;
  }

  std::optional<Reply> Get(const std::string& path) { return Send("GET", path, "", ""); }
  std::optional<Reply> Put(const std::string& path, const std::string& body = "") {
    return Send("PUT", path, body, "application/json");
  }
  std::optional<Reply> Delete(const std::string& path) { return Send("DELETE", path, "", ""); }
  std::optional<Reply> Post(const std::string& path, const std::string& body,
                            const std::string& content_type) {
    return Send("POST", path, body, content_type);
  }

 private:
  static std::string Normalise(std::string url) {
    while (url.ends_with('/')) url.pop_back();
    // A bare HOST:PORT means plain HTTP, as it always has.
    if (url.find("://") == std::string::npos) url = "http://" + url;
    return url;
  }

  std::optional<Reply> Send(const char* method, const std::string& path, const std::string& body,
                            const std::string& content_type) {
    http::ClientRequest request;
    request.method = method;
    request.url = url_ + path;
    request.body = body;
    if (!content_type.empty()) request.headers.emplace_back("Content-Type", content_type);
    if (!options_.token.empty()) {
      request.headers.emplace_back("Authorization", "Bearer " + options_.token);
    } else if (!options_.user.empty()) {
      auto colon = options_.user.find(':');
      request.user = options_.user.substr(0, colon);
      request.password = colon == std::string::npos ? "" : options_.user.substr(colon + 1);
    }
    request.ca_file = options_.cacert;
    request.connect_timeout = std::chrono::seconds(5);
    request.timeout = request.method == "POST" ? kSubmitReadTimeout : options_.request_timeout;
    request.max_response_bytes = kMaxResponseBytes;
    auto response = http::Client().Send(request);
    if (!response.ok()) {
      std::string why = response.status().message();
      if (why.starts_with("TLS:") && options_.cacert.empty()) {
        why +=
            "; for a private CA or a self-signed certificate, pass --cacert FILE or set "
            "BATON_CACERT";
      }
      err_ << fmt::format("baton: cannot reach {}: {}\n", url_, why);
      return std::nullopt;
    }
    return Reply{response->status, std::move(response->body)};
  }

  std::string url_;
  const ClientOptions& options_;
  std::ostream& err_;
};

json ParseBody(const std::string& body) { return json::parse(body, nullptr, false); }

// Prints the server's `message` for a 4xx/5xx and returns kExitFailure.
int ReportError(const Reply& reply, std::ostream& err) {
  json body = ParseBody(reply.body);
  std::string message;
  if (body.is_object() && body.contains("message") && body["message"].is_string()) {
    message = body["message"].get<std::string>();
  } else {
    message = reply.body.empty() ? "no message" : reply.body;
    while (!message.empty() && message.back() == '\n') message.pop_back();
  }
  err << fmt::format("baton: {} (HTTP {})\n", message, reply.status);
  return kExitFailure;
}

std::string Query(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    out += out.empty() ? '?' : '&';
    out += key + '=' + PercentEncode(value);
  }
  return out;
}

std::string JobPath(const std::string& id) { return "/jobs/" + PercentEncode(id); }

// A field as display text: strings as they are, numbers and the rest as JSON, absent
// fields empty.
std::string Text(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

// "2024-05-01T10:00:00.123Z" → "2024-05-01 10:00:00": tables need no milliseconds.
std::string Time(const json& object, const char* key) {
  std::string text = Text(object, key);
  if (text.size() >= 19 && text[10] == 'T') return text.substr(0, 10) + ' ' + text.substr(11, 8);
  return text;
}

std::string Progress(const json& object) {
  auto it = object.find("progress");
  if (it == object.end() || !it->is_number()) return "";
  return fmt::format("{:.0f}%", it->get<double>());
}

std::string Cell(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > kMaxCellWidth) text = text.substr(0, kMaxCellWidth - 3) + "...";
  return text;
}

void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<std::size_t> widths(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) widths[c] = header[c].size();
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << '\n';
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
}

// Whether a job's wire state is one it ends in; an unknown state is not.
bool Ended(const std::string& state) {
  std::optional<JobState> parsed = ParseJobState(state);
  return parsed && IsTerminal(*parsed);
}

// The final lines of `--wait` / `--follow`: the state, then the result or the error.
int PrintOutcome(const json& job, const ClientOptions& options, std::ostream& out) {
  std::string state = Text(job, "state");
  if (options.json) {
    out << job.dump(2) << '\n';
  } else {
    out << state << '\n';
    std::string result = Text(job, "result");
    std::string error = Text(job, "error");
    if (!result.empty()) out << result << (result.ends_with('\n') ? "" : "\n");
    if (!error.empty()) out << "error: " << error << (error.ends_with('\n') ? "" : "\n");
  }
  return ParseJobState(state) == JobState::kCompleted ? kExitOk : kExitFailure;
}

// Polling delays: start short so quick jobs return at once, back off towards `poll_max`.
class Backoff {
 public:
  explicit Backoff(const ClientOptions& options)
      : initial_(options.poll_initial), max_(options.poll_max), next_(initial_) {}
  void Sleep() {
    std::this_thread::sleep_for(next_);
    next_ = std::min(max_, next_ + next_ / 2 + std::chrono::milliseconds(1));
  }
  void Reset() { next_ = initial_; }

 private:
  std::chrono::milliseconds initial_, max_, next_;
};

// Log parts the follower has not printed yet, oldest first.
class LogFollower {
 public:
  LogFollower(Api& api, std::string id) : api_(api), path_(JobPath(id) + "/log") {}

  // Fetches new parts; false when the server cannot be reached or refuses.
  bool Poll(std::vector<json>& fresh, std::ostream& err) {
    fresh.clear();
    // The log is newest first: read pages until one holds a part already seen.
    for (int page = 1;; ++page) {
      auto reply = api_.Get(
          path_ + Query({{"page", std::to_string(page)}, {"size", std::to_string(kMaxPageSize)}}));
      if (!reply) return false;
      if (!reply->ok()) {
        ReportError(*reply, err);
        return false;
      }
      json body = ParseBody(reply->body);
      if (!body.is_object() || !body["items"].is_array()) return true;
      bool reached_seen = false;
      for (const json& part : body["items"]) {
        std::string key = part.contains("id") ? part["id"].dump() : part.dump();
        if (!seen_.insert(key).second) {
          reached_seen = true;
          break;
        }
        fresh.push_back(part);
      }
      int total_pages = body.value("totalPages", 0);
      if (reached_seen || page >= total_pages || body["items"].empty()) break;
    }
    std::reverse(fresh.begin(), fresh.end());
    return true;
  }

 private:
  Api& api_;
  std::string path_;
  std::set<std::string> seen_;
};

int WaitForJob(Api& api, const ClientOptions& options, const SubmitOptions& submit,
               const std::string& id, std::ostream& out, std::ostream& err) {
  Backoff backoff(options);
  std::optional<LogFollower> follower;
  if (submit.follow) follower.emplace(api, id);
  std::string last_status;
  bool progress_drawn = false;
  auto clear_progress = [&] {
    if (progress_drawn) out << "\r\033[K";
    progress_drawn = false;
  };
  while (true) {
    auto reply = api.Get(JobPath(id));
    if (!reply) return kExitFailure;
    if (!reply->ok()) return ReportError(*reply, err);
    json job = ParseBody(reply->body);
    if (!job.is_object()) {
      err << "baton: the server sent a job that is not JSON\n";
      return kExitFailure;
    }
    std::string state = Text(job, "state");
    if (follower) {
      // The log is read after the state, so a terminal state's last lines are printed.
      std::vector<json> fresh;
      if (!follower->Poll(fresh, err)) return kExitFailure;
      if (!fresh.empty()) {
        clear_progress();
        backoff.Reset();
      }
      for (const json& part : fresh) {
        std::string contents = Text(part, "contents");
        out << contents;
        if (submit.tty && !contents.empty() && !contents.ends_with('\n')) out << '\n';
      }
      std::string progress = Progress(job);
      std::string status = progress.empty() ? state : state + " " + progress;
      if (submit.tty && !Ended(state)) {
        // Redrawn only when it changed or log lines pushed it away, so it does not flicker.
        if (!progress_drawn || status != last_status) {
          clear_progress();
          out << status << std::flush;
          progress_drawn = true;
        }
      } else if (!submit.tty && status != last_status) {
        // Not a terminal: plain lines on stderr, so stdout carries only the log.
        err << "[" << status << "]\n";
      }
      last_status = status;
      out << std::flush;
    }
    if (Ended(state)) {
      clear_progress();
      return PrintOutcome(job, options, out);
    }
    backoff.Sleep();
  }
}

}  // namespace

int Submit(const ClientOptions& options, const SubmitOptions& submit, std::ostream& out,
           std::ostream& err) {
  if (submit.schedule.empty() && !submit.timezone.empty()) {
    err << "baton: --timezone needs --schedule\n";
    return kExitUsage;
  }
  if (!submit.schedule.empty() && (submit.wait || submit.follow)) {
    err << "baton: --schedule cannot be combined with --wait or --follow: a scheduled job runs "
           "at its ticks\n";
    return kExitUsage;
  }
  std::string text;
  std::string error;
  if (!ReadJobFile(submit.file, text, error)) {
    err << fmt::format("baton: {}: cannot read: {}\n", submit.file, error);
    return kExitUsage;
  }
  DocumentFormat format = JobFileFormat(submit.file, text);
  std::string content_type = format == DocumentFormat::kJson ? "application/json" : "text/yaml";
  if (!submit.inputs.empty() || !submit.schedule.empty()) {
    StringMap inputs;
    for (const std::string& input : submit.inputs) {
      auto eq = input.find('=');
      if (eq == std::string::npos || eq == 0) {
        err << fmt::format("baton: -i {}: expected KEY=VALUE\n", input);
        return kExitUsage;
      }
      inputs[input.substr(0, eq)] = input.substr(eq + 1);
    }
    // Inputs are merged into the parsed job, so the file must be valid here already.
    JobParseResult parsed = ParseJob(text, format);
    if (!parsed.ok()) {
      for (const Diagnostic& d : parsed.problems) err << submit.file << ':' << d.ToString() << '\n';
      return kExitFailure;
    }
    for (auto& [key, value] : inputs) parsed.job->inputs[key] = value;
    json body = ToJson(*parsed.job);
    if (!submit.schedule.empty()) {
      body["schedule"] = {{"cron", submit.schedule}};
      if (!submit.timezone.empty()) body["schedule"]["timezone"] = submit.timezone;
    }
    text = body.dump();
    content_type = "application/json";
  }

  Api api(options, err);
  if (!api.Valid()) return kExitUsage;
  if (!submit.schedule.empty()) {
    auto reply = api.Post("/scheduled-jobs", text, content_type);
    if (!reply) return kExitFailure;
    if (!reply->ok()) return ReportError(*reply, err);
    json scheduled = ParseBody(reply->body);
    out << (options.json ? scheduled.dump(2) : Text(scheduled, "id")) << '\n';
    return kExitOk;
  }
  auto reply = api.Post("/jobs", text, content_type);
  if (!reply) return kExitFailure;
  if (!reply->ok()) return ReportError(*reply, err);
  json job = ParseBody(reply->body);
  std::string id = Text(job, "id");
  if (id.empty()) {
    err << "baton: the server's answer has no job id: " << reply->body << '\n';
    return kExitFailure;
  }
  if (!submit.wait && !submit.follow) {
    out << (options.json ? job.dump(2) : id) << '\n';
    return kExitOk;
  }
  if (!options.json) out << id << '\n' << std::flush;
  return WaitForJob(api, options, submit, id, out, err);
}

namespace {

// What a GET gave a command that shows it: the answer's JSON to show, or, in `done`, the
// exit code once there is nothing left to do (a usage or transport error, an error answer
// reported; or the answer printed as it is: with --json, or when `object` and it is no
// JSON object).
struct Fetched {
  std::optional<int> done;
  json body;
};
Fetched Fetch(const ClientOptions& options, const std::string& path, bool object, std::ostream& out,
              std::ostream& err) {
  Api api(options, err);
  if (!api.Valid()) return {kExitUsage, {}};
  auto reply = api.Get(path);
  if (!reply) return {kExitFailure, {}};
  if (!reply->ok()) return {ReportError(*reply, err), {}};
  json body = ParseBody(reply->body);
  if (options.json || (object && !body.is_object())) {
    out << (body.is_discarded() ? reply->body : body.dump(2)) << '\n';
    return {kExitOk, {}};
  }
  return {std::nullopt, std::move(body)};
}

}  // namespace

int ListJobs(const ClientOptions& options, const std::string& query, const PageOptions& page,
             std::ostream& out, std::ostream& err) {
  std::vector<std::pair<std::string, std::string>> params;
  if (!query.empty()) params.emplace_back("q", query);
  if (page.page) params.emplace_back("page", std::to_string(*page.page));
  if (page.size) params.emplace_back("size", std::to_string(*page.size));
  Fetched fetched = Fetch(options, "/jobs" + Query(params), /*object=*/false, out, err);
  if (fetched.done) return *fetched.done;
  json& body = fetched.body;
  std::vector<std::vector<std::string>> rows;
  if (body.is_object() && body["items"].is_array()) {
    for (const json& job : body["items"]) {
      rows.push_back({Text(job, "id"), Cell(Text(job, "name")), Text(job, "state"), Progress(job),
                      Time(job, "createdAt")});
    }
  }
  PrintTable({"ID", "NAME", "STATE", "PROGRESS", "CREATED"}, rows, out);
  out << fmt::format("page {} of {}, {} jobs\n", Text(body, "number"), Text(body, "totalPages"),
                     Text(body, "totalItems"));
  return kExitOk;
}

int GetJob(const ClientOptions& options, const std::string& id, std::ostream& out,
           std::ostream& err) {
  Fetched fetched = Fetch(options, JobPath(id), /*object=*/true, out, err);
  if (fetched.done) return *fetched.done;
  json& job = fetched.body;
  auto field = [&](const char* label, std::string value) {
    if (value.empty()) return;
    while (value.ends_with('\n')) value.pop_back();
    // Continuation lines (an error's last lines of output) line up under the first.
    for (auto at = value.find('\n'); at != std::string::npos; at = value.find('\n', at + 13)) {
      value.insert(at + 1, std::string(12, ' '));
    }
    out << fmt::format("{:<11} {}\n", label, value);
  };
  field("ID:", Text(job, "id"));
  field("Name:", Text(job, "name"));
  field("Parent:", Text(job, "parentId"));
  field("State:", Text(job, "state"));
  field("Progress:", Progress(job));
  field("Created:", Time(job, "createdAt"));
  field("Started:", Time(job, "startedAt"));
  field("Completed:", Time(job, "completedAt"));
  field("Failed:", Time(job, "failedAt"));
  field("Result:", Text(job, "result"));
  field("Error:", Text(job, "error"));
  if (job.contains("execution") && job["execution"].is_array() && !job["execution"].empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const json& task : job["execution"]) {
      std::string outcome = Text(task, "error");
      if (outcome.empty()) outcome = Text(task, "result");
      std::string ended = Time(task, "completedAt");
      if (ended.empty()) ended = Time(task, "failedAt");
      rows.push_back({Text(task, "id"), Cell(Text(task, "name")), Text(task, "state"),
                      Time(task, "startedAt"), ended, Cell(outcome)});
    }
    out << '\n';
    PrintTable({"TASK", "NAME", "STATE", "STARTED", "ENDED", "RESULT/ERROR"}, rows, out);
  }
  return kExitOk;
}

namespace {

// A PUT or DELETE of `path` that changes something: prints `done` (with --json, the
// answer as it came).
int Change(const ClientOptions& options, std::string_view method, const std::string& path,
           const std::string& done, std::ostream& out, std::ostream& err,
           const std::string& body = "") {
  Api api(options, err);
  if (!api.Valid()) return kExitUsage;
  auto reply = method == "DELETE" ? api.Delete(path)
               : method == "POST" ? api.Post(path, body, "application/json")
                                  : api.Put(path, body);
  if (!reply) return kExitFailure;
  if (!reply->ok()) return ReportError(*reply, err);
  if (options.json) {
    out << reply->body << (reply->body.ends_with('\n') ? "" : "\n");
  } else {
    out << done << '\n';
  }
  return kExitOk;
}

int PutJob(const ClientOptions& options, const std::string& id, const char* action,
           const char* done, std::ostream& out, std::ostream& err) {
  return Change(options, "PUT", JobPath(id) + "/" + action, fmt::format("job {} {}", id, done), out,
                err);
}

}  // namespace

int CancelJob(const ClientOptions& options, const std::string& id, std::ostream& out,
              std::ostream& err) {
  return PutJob(options, id, "cancel", "cancelled", out, err);
}

int RestartJob(const ClientOptions& options, const std::string& id, std::ostream& out,
               std::ostream& err) {
  return PutJob(options, id, "restart", "restarted", out, err);
}

int RerunJob(const ClientOptions& options, const std::string& id, const RerunOptions& rerun,
             std::ostream& out, std::ostream& err) {
  json body = json::object();
  if (!rerun.mode.empty()) body["mode"] = rerun.mode;
  if (!rerun.from.empty()) body["from"] = rerun.from;
  for (const std::string& input : rerun.inputs) {
    const std::size_t eq = input.find('=');
    if (eq == std::string::npos || eq == 0) {
      err << fmt::format("baton: --input \"{}\": expected NAME=VALUE\n", input);
      return kExitUsage;
    }
    body["inputs"][input.substr(0, eq)] = input.substr(eq + 1);
  }
  return Change(options, "PUT", JobPath(id) + "/rerun", fmt::format("job {} runs again", id), out,
                err, body.dump());
}

int SignalJob(const ClientOptions& options, const std::string& id, const std::string& name,
              const std::string& payload, std::ostream& out, std::ostream& err) {
  return Change(options, "POST", JobPath(id) + "/signals/" + name,
                fmt::format("job {} signalled {}", id, name), out, err, payload);
}

int PauseJob(const ClientOptions& options, const std::string& id, std::ostream& out,
             std::ostream& err) {
  return PutJob(options, id, "pause", "paused", out, err);
}

int ResumeJob(const ClientOptions& options, const std::string& id, std::ostream& out,
              std::ostream& err) {
  return PutJob(options, id, "resume", "resumed", out, err);
}

int JobLog(const ClientOptions& options, const std::string& id, const PageOptions& page,
           std::ostream& out, std::ostream& err) {
  Api api(options, err);
  if (!api.Valid()) return kExitUsage;
  auto fetch = [&](int number, int size) -> std::optional<json> {
    auto reply = api.Get(JobPath(id) + "/log" +
                         Query({{"page", std::to_string(number)}, {"size", std::to_string(size)}}));
    if (!reply) return std::nullopt;
    if (!reply->ok()) {
      ReportError(*reply, err);
      return std::nullopt;
    }
    json body = ParseBody(reply->body);
    if (!body.is_object()) {
      err << "baton: the server sent a log page that is not JSON\n";
      return std::nullopt;
    }
    return body;
  };
  auto print_parts = [&](const json& body) {
    if (!body["items"].is_array()) return;
    // Pages are newest first; a reader wants the log in the order it was written.
    for (auto it = body["items"].rbegin(); it != body["items"].rend(); ++it) {
      out << Text(*it, "contents");
    }
  };
  if (page.page || options.json) {
    auto body = fetch(page.page.value_or(1), page.size.value_or(25));
    if (!body) return kExitFailure;
    if (options.json) {
      out << body->dump(2) << '\n';
    } else {
      print_parts(*body);
    }
    return kExitOk;
  }
  int size = page.size.value_or(kMaxPageSize);
  auto first = fetch(1, size);
  if (!first) return kExitFailure;
  std::vector<json> pages{*first};
  int total_pages = first->value("totalPages", 1);
  for (int number = 2; number <= total_pages; ++number) {
    auto next = fetch(number, size);
    if (!next) return kExitFailure;
    pages.push_back(*next);
  }
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) print_parts(*it);
  out << std::flush;
  return kExitOk;
}

int Health(const ClientOptions& options, std::ostream& out, std::ostream& err) {
  Api api(options, err);
  if (!api.Valid()) return kExitUsage;
  auto reply = api.Get("/health");
  if (!reply) return kExitFailure;
  json body = ParseBody(reply->body);
  std::string status = Text(body, "status");
  if (options.json) {
    out << (body.is_discarded() ? reply->body : body.dump(2)) << '\n';
  } else if (!status.empty()) {
    std::string version = Text(body, "version");
    out << status << (version.empty() ? "" : " (baton " + version + ")") << '\n';
  }
  if (reply->ok() && status == "UP") return kExitOk;
  if (status.empty() && !options.json) return ReportError(*reply, err);
  return kExitFailure;
}

// ---- baton schedules ---------------------------------------------------------------

namespace {

std::string SchedulePath(const std::string& id) { return "/scheduled-jobs/" + PercentEncode(id); }

// PUT .../pause, PUT .../resume or DELETE: "scheduled job ID paused" or the server's JSON.
int ChangeSchedule(const ClientOptions& options, const std::string& id, const char* action,
                   const char* done, std::ostream& out, std::ostream& err) {
  const bool remove = std::string_view(action) == "delete";
  return Change(options, remove ? "DELETE" : "PUT",
                remove ? SchedulePath(id) : SchedulePath(id) + "/" + action,
                fmt::format("scheduled job {} {}", id, done), out, err);
}

std::string Zone(const json& scheduled) {
  if (!scheduled.is_object() || !scheduled.contains("schedule")) return "";
  return Text(scheduled["schedule"], "timezone");
}

}  // namespace

int ListSchedules(const ClientOptions& options, const PageOptions& page, std::ostream& out,
                  std::ostream& err) {
  std::vector<std::pair<std::string, std::string>> params;
  if (page.page) params.emplace_back("page", std::to_string(*page.page));
  if (page.size) params.emplace_back("size", std::to_string(*page.size));
  Fetched fetched = Fetch(options, "/scheduled-jobs" + Query(params), /*object=*/false, out, err);
  if (fetched.done) return *fetched.done;
  json& body = fetched.body;
  std::vector<std::vector<std::string>> rows;
  if (body.is_object() && body["items"].is_array()) {
    for (const json& s : body["items"]) {
      rows.push_back({Text(s, "id"), Cell(Text(s, "name")), Text(s, "state"), Text(s, "cron"),
                      Zone(s), Time(s, "nextRunAt")});
    }
  }
  PrintTable({"ID", "NAME", "STATE", "CRON", "TIMEZONE", "NEXT RUN"}, rows, out);
  out << fmt::format("page {} of {}, {} scheduled jobs\n", Text(body, "number"),
                     Text(body, "totalPages"), Text(body, "totalItems"));
  return kExitOk;
}

int GetSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                std::ostream& err) {
  Fetched fetched = Fetch(options, SchedulePath(id), /*object=*/true, out, err);
  if (fetched.done) return *fetched.done;
  json& s = fetched.body;
  json schedule = s.value("schedule", json::object());
  json catch_up = schedule.value("catchUp", json::object());
  auto field = [&](const char* label, const std::string& value) {
    if (!value.empty()) out << fmt::format("{:<11} {}\n", label, value);
  };
  field("ID:", Text(s, "id"));
  field("Name:", Text(s, "name"));
  field("State:", Text(s, "state"));
  field("Cron:", Text(s, "cron"));
  field("Timezone:", Text(schedule, "timezone"));
  field("Overlap:", Text(schedule, "overlap"));
  field("Catch-up:", Text(catch_up, "fire") + " within " + Text(catch_up, "window"));
  field("Next run:", Time(s, "nextRunAt"));
  field("Last job:", Text(s, "lastJobId"));
  field("Created:", Time(s, "createdAt"));
  field("Updated:", Time(s, "updatedAt"));
  return kExitOk;
}

int PauseSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                  std::ostream& err) {
  return ChangeSchedule(options, id, "pause", "paused", out, err);
}

int ResumeSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                   std::ostream& err) {
  return ChangeSchedule(options, id, "resume", "resumed", out, err);
}

int DeleteSchedule(const ClientOptions& options, const std::string& id, std::ostream& out,
                   std::ostream& err) {
  return ChangeSchedule(options, id, "delete", "deleted", out, err);
}

int CreateUser(const ClientOptions& options, const NewUser& user, std::ostream& out,
               std::ostream& err) {
  if (user.password.empty()) {
    err << "baton: no password: pipe it to --password-stdin, or set BATON_NEW_PASSWORD\n";
    return kExitUsage;
  }
  Api api(options, err);
  if (!api.Valid()) return kExitUsage;
  json body = {{"username", user.username}, {"password", user.password}};
  if (!user.name.empty()) body["name"] = user.name;
  if (!user.roles.empty()) body["roles"] = user.roles;
  auto reply = api.Post("/users", body.dump(), "application/json");
  if (!reply) return kExitFailure;
  if (!reply->ok()) return ReportError(*reply, err);
  json created = ParseBody(reply->body);
  if (options.json) {
    out << created.dump(2) << '\n';
  } else {
    std::string roles;
    for (const json& r : created.value("roles", json::array())) {
      roles += (roles.empty() ? "" : ",") + r.get<std::string>();
    }
    out << fmt::format("created user {}{}\n", Text(created, "username"),
                       roles.empty() ? "" : " (roles " + roles + ")");
  }
  return kExitOk;
}

int CreateKey(const ClientOptions& options, const std::string& name, const std::string& for_user,
              std::ostream& out, std::ostream& err) {
  Api api(options, err);
  if (!api.Valid()) return kExitUsage;
  json body = json::object();
  if (!name.empty()) body["name"] = name;
  if (!for_user.empty()) body["username"] = for_user;
  auto reply = api.Post("/keys", body.dump(), "application/json");
  if (!reply) return kExitFailure;
  if (!reply->ok()) return ReportError(*reply, err);
  json key = ParseBody(reply->body);
  if (options.json) {
    out << key.dump(2) << '\n';
  } else {
    out << fmt::format("id:  {}\nkey: {}\n", Text(key, "id"), Text(key, "key"));
    err << "baton: the key is shown this once; keep it (send it as --token or BATON_TOKEN)\n";
  }
  return kExitOk;
}

int ListKeys(const ClientOptions& options, const std::string& for_user, std::ostream& out,
             std::ostream& err) {
  Api api(options, err);
  if (!api.Valid()) return kExitUsage;
  std::vector<std::pair<std::string, std::string>> params;
  if (!for_user.empty()) params.emplace_back("username", for_user);
  auto reply = api.Get("/keys" + Query(params));
  if (!reply) return kExitFailure;
  if (!reply->ok()) return ReportError(*reply, err);
  json keys = ParseBody(reply->body);
  if (options.json) {
    out << keys.dump(2) << '\n';
    return kExitOk;
  }
  out << fmt::format("{:<32}  {:<16}  {:<16}  {:<24}  {}\n", "ID", "USER", "NAME", "CREATED",
                     "REVOKED");
  for (const json& key : keys) {
    out << fmt::format("{:<32}  {:<16}  {:<16}  {:<24}  {}\n", Text(key, "id"),
                       Text(key, "username"), Text(key, "name"), Text(key, "createdAt"),
                       Text(key, "revokedAt"));
  }
  return kExitOk;
}

int RevokeKey(const ClientOptions& options, const std::string& id, std::ostream& out,
              std::ostream& err) {
  return Change(options, "DELETE", "/keys/" + PercentEncode(id), fmt::format("revoked key {}", id),
                out, err);
}

}  // namespace baton::cli
