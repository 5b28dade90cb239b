#include "core/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <span>

#include "core/job_decode.h"
#include "core/job_json.h"
#include "core/records.h"

namespace baton {
namespace {

using nlohmann::json;

constexpr std::string_view kScheduleFields[] = {"cron", "timezone", "overlap", "catchUp"};
constexpr std::string_view kCatchUpFields[] = {"window", "fire"};

// Decodes the `schedule` map, reporting each problem with its path.
class ScheduleDecoder {
 public:
  std::vector<Diagnostic> problems;

  std::optional<ScheduleSpec> Decode(const Node& node) {
    ScheduleSpec spec;
    bool has_cron = false;
    baton::Mark cron_mark = node.mark;
    baton::Mark zone_mark = node.mark;
    if (!Fields(node, "schedule", kScheduleFields, [&](const MapEntry& e, const std::string& p) {
          if (e.key == "cron") {
            has_cron = String(e.value, p, &spec.cron);
            cron_mark = e.value.mark;
          } else if (e.key == "timezone") {
            String(e.value, p, &spec.timezone);
            zone_mark = e.value.mark;
          } else if (e.key == "overlap") {
            std::string text;
            if (!String(e.value, p, &text)) return;
            if (auto policy = ParseOverlapPolicy(text)) {
              spec.overlap = *policy;
            } else {
              Problem(e.value.mark, p,
                      fmt::format("unknown overlap policy \"{}\" (expected allow, skip, "
                                  "buffer_one or cancel_other)",
                                  text.substr(0, 40)));
            }
          } else if (e.key == "catchUp") {
            Fields(e.value, p, kCatchUpFields, [&](const MapEntry& c, const std::string& q) {
              std::string text;
              if (!String(c.value, q, &text)) return;
              if (c.key == "window") {
                Result<Duration> window = ParseDuration(text);
                if (!window.ok()) {
                  Problem(c.value.mark, q, window.status().message());
                } else if (*window > kMaxCatchUpWindow) {
                  Problem(c.value.mark, q,
                          fmt::format("at most {}, got {}", FormatDuration(kMaxCatchUpWindow),
                                      FormatDuration(*window)));
                } else {
                  spec.catch_up_window = *window;
                }
              } else if (auto fire = ParseCatchUpFire(text)) {
                spec.catch_up = *fire;
              } else {
                Problem(c.value.mark, q,
                        fmt::format("expected all or latest, got \"{}\"", text.substr(0, 40)));
              }
            });
          }
        })) {
      return std::nullopt;
    }
    if (!has_cron) {
      if (problems.empty()) Problem(node.mark, "schedule.cron", "a schedule needs a cron");
      return std::nullopt;
    }
    if (Result<CronSchedule> cron = CronSchedule::Parse(spec.cron); !cron.ok()) {
      Problem(cron_mark, "schedule.cron", cron.status().message());
    }
    if (Result<TimeZone> zone = TimeZone::Find(spec.timezone); !zone.ok()) {
      Problem(zone_mark, "schedule.timezone", zone.status().message());
    }
    return spec;
  }

 private:
  void Problem(baton::Mark mark, const std::string& path, std::string message) {
    problems.push_back({mark, path, std::move(message)});
  }

  bool String(const Node& node, const std::string& path, std::string* out) {
    if (node.kind != Node::Kind::kString) {
      Problem(node.mark, path, fmt::format("expected a string, got {}", node.KindName()));
      return false;
    }
    *out = node.text;
    return true;
  }

  template <typename Handler>
  bool Fields(const Node& node, const std::string& path, std::span<const std::string_view> known,
              Handler&& handle) {
    if (node.kind != Node::Kind::kMap) {
      Problem(node.mark, path, fmt::format("expected a map, got {}", node.KindName()));
      return false;
    }
    std::set<std::string_view> seen;
    for (const MapEntry& e : node.entries) {
      std::string p = path + "." + e.key;
      if (!seen.insert(e.key).second) {
        Problem(e.key_mark, p, fmt::format("duplicate field \"{}\"", e.key));
      } else if (std::find(known.begin(), known.end(), e.key) == known.end()) {
        Problem(e.key_mark, p, fmt::format("unknown field \"{}\"", e.key.substr(0, 40)));
      } else if (e.value.kind != Node::Kind::kNull) {
        handle(e, p);
      }
    }
    return true;
  }
};

}  // namespace

std::string_view ToString(ScheduleState state) {
  return state == ScheduleState::kActive ? "ACTIVE" : "PAUSED";
}

std::optional<ScheduleState> ParseScheduleState(std::string_view text) {
  if (text == "ACTIVE") return ScheduleState::kActive;
  if (text == "PAUSED") return ScheduleState::kPaused;
  return std::nullopt;
}

std::string_view ToString(OverlapPolicy policy) {
  switch (policy) {
    case OverlapPolicy::kAllow:
      return "allow";
    case OverlapPolicy::kSkip:
      return "skip";
    case OverlapPolicy::kBufferOne:
      return "buffer_one";
    case OverlapPolicy::kCancelOther:
      return "cancel_other";
  }
  return "allow";
}

std::optional<OverlapPolicy> ParseOverlapPolicy(std::string_view text) {
  for (OverlapPolicy p : {OverlapPolicy::kAllow, OverlapPolicy::kSkip, OverlapPolicy::kBufferOne,
                          OverlapPolicy::kCancelOther}) {
    if (text == ToString(p)) return p;
  }
  return std::nullopt;
}

std::string_view ToString(CatchUpFire fire) { return fire == CatchUpFire::kAll ? "all" : "latest"; }

std::optional<CatchUpFire> ParseCatchUpFire(std::string_view text) {
  if (text == "all") return CatchUpFire::kAll;
  if (text == "latest") return CatchUpFire::kLatest;
  return std::nullopt;
}

Result<CompiledSchedule> CompileSchedule(const ScheduleSpec& spec) {
  Result<CronSchedule> cron = CronSchedule::Parse(spec.cron);
  if (!cron.ok()) return InvalidArgument("schedule.cron: " + cron.status().message());
  Result<TimeZone> zone = TimeZone::Find(spec.timezone);
  if (!zone.ok()) return InvalidArgument("schedule.timezone: " + zone.status().message());
  return CompiledSchedule{std::move(*cron), std::move(*zone)};
}

std::string ScheduledJobParseResult::Message() const {
  std::string out;
  for (const Diagnostic& d : problems) {
    if (!out.empty()) out += '\n';
    out += d.ToString();
  }
  return out;
}

ScheduledJobParseResult ParseScheduledJob(std::string_view text, DocumentFormat format,
                                          std::size_t max_bytes, int max_loop_iterations) {
  ScheduledJobParseResult result;
  ParsedDocument doc = ParseDocument(text, format, max_bytes);
  if (doc.error) {
    result.problems.push_back(*doc.error);
    result.too_large = doc.too_large;
    return result;
  }
  Node root = std::move(*doc.root);
  std::optional<Node> schedule_node;
  std::optional<Mark> wait_mark;
  if (root.kind == Node::Kind::kMap) {
    auto& entries = root.entries;
    for (auto it = entries.begin(); it != entries.end();) {
      if (it->key == "schedule" && !schedule_node) {
        schedule_node = std::move(it->value);
        it = entries.erase(it);
      } else {
        if (it->key == "wait") wait_mark = it->key_mark;
        ++it;
      }
    }
  }
  JobParseResult job = DecodeJob(root, max_loop_iterations);
  result.problems = std::move(job.problems);
  ScheduleDecoder decoder;
  std::optional<ScheduleSpec> spec;
  if (root.kind == Node::Kind::kMap) {
    if (schedule_node && schedule_node->kind != Node::Kind::kNull) {
      spec = decoder.Decode(*schedule_node);
    } else {
      decoder.problems.push_back(
          {root.mark, "schedule", "a scheduled job needs a schedule with a cron"});
    }
    if (wait_mark) {
      decoder.problems.push_back(
          {*wait_mark, "wait", "a scheduled job cannot wait: no one waits for its runs"});
    }
  }
  for (Diagnostic& d : decoder.problems) result.problems.push_back(std::move(d));
  std::stable_sort(
      result.problems.begin(), result.problems.end(), [](const Diagnostic& a, const Diagnostic& b) {
        return std::pair(a.mark.line, a.mark.column) < std::pair(b.mark.line, b.mark.column);
      });
  if (result.problems.empty()) {
    result.job = std::move(job.job);
    result.schedule = std::move(spec);
  }
  return result;
}

json ToJson(const ScheduleSpec& spec) {
  json out = {{"cron", spec.cron}, {"overlap", ToString(spec.overlap)}};
  out["timezone"] = spec.timezone.empty() ? "UTC" : spec.timezone;
  out["catchUp"] = {{"window", FormatDuration(spec.catch_up_window)},
                    {"fire", ToString(spec.catch_up)}};
  return out;
}

json ToJson(const ScheduledJobRecord& record, bool summary) {
  json definition = ToJson(record.job);
  json out = json::object();
  out["id"] = record.id;
  for (const char* key :
       {"name", "description", "tags", "inputs", "output", "autoDelete", "timeout"}) {
    if (definition.contains(key)) out[key] = definition[key];
  }
  out["state"] = ToString(record.state);
  out["cron"] = record.schedule.cron;  // Tork's field
  out["schedule"] = ToJson(record.schedule);
  out["createdAt"] = FormatTime(record.created_at);
  out["updatedAt"] = FormatTime(record.updated_at);
  if (!record.created_by.empty()) out["createdBy"] = record.created_by;
  if (record.state == ScheduleState::kActive) out["nextRunAt"] = FormatTime(record.next_tick_at);
  if (!record.last_job_id.empty()) out["lastJobId"] = record.last_job_id;
  if (summary) return out;
  for (const char* key : {"tasks", "secrets", "defaults", "webhooks", "permissions"}) {
    if (definition.contains(key)) out[key] = definition[key];
  }
  return out;
}

Job FiredJob(const ScheduledJobRecord& record) {
  Job job = record.job;
  job.schedule = JobSchedule{record.id, record.schedule.cron};
  return job;
}

}  // namespace baton
