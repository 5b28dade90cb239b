#include "core/job_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <span>

#include "core/auth.h"
#include "core/graph.h"
#include "core/names.h"
#include "core/records.h"
#include "core/task_kind.h"
#include "expr/expr.h"

namespace baton {
namespace {

using Fields = std::span<const std::string_view>;

// Field names of each object, as the spec spells them.
constexpr std::string_view kJobFields[] = {
    "name",        "description", "tags",       "inputs",    "secrets", "defaults",
    "output",      "webhooks",    "autoDelete", "wait",      "timeout", "tasks",
    "permissions", "createdBy",   "mode",       "onFailure", "finally"};
// A stored job may also carry what the engine set: the schedule that fired it.
constexpr std::string_view kStoredJobFields[] = {
    "name",        "description", "tags",       "inputs", "secrets",   "defaults",
    "output",      "webhooks",    "autoDelete", "wait",   "timeout",   "tasks",
    "permissions", "createdBy",   "schedule",   "mode",   "onFailure", "finally"};
constexpr std::string_view kJobScheduleFields[] = {"id", "cron"};
constexpr std::string_view kRunnableFields[] = {"image", "run",    "cmd",    "entrypoint", "env",
                                                "files", "queue",  "pre",    "post",       "mounts",
                                                "retry", "limits", "timeout"};
constexpr std::string_view kTaskFields[] = {
    "name",        "description", "var",    "if",       "run",       "image",       "cmd",
    "entrypoint",  "env",         "files",  "workdir",  "queue",     "priority",    "pre",
    "post",        "sidecars",    "mounts", "networks", "limits",    "gpus",        "registry",
    "tags",        "timeout",     "retry",  "parallel", "each",      "subjob",      "needs",
    "triggerRule", "optional",    "switch", "loop",     "onFailure", "pauseBefore", "wait"};
// A stored task may also be a row the engine made to run cleanup tasks (Task::handles).
constexpr std::string_view kStoredTaskFields[] = {
    "name",     "description", "var",       "if",       "run",         "image",
    "cmd",      "entrypoint",  "env",       "files",    "workdir",     "queue",
    "priority", "pre",         "post",      "sidecars", "mounts",      "networks",
    "limits",   "gpus",        "registry",  "tags",     "timeout",     "retry",
    "parallel", "each",        "subjob",    "needs",    "triggerRule", "optional",
    "switch",   "loop",        "onFailure", "handles",  "pauseBefore", "wait"};
constexpr std::string_view kOnFailureFields[] = {"tasks", "then"};
constexpr std::string_view kAuxFields[] = {"name",    "description", "run", "image",
                                           "cmd",     "entrypoint",  "env", "files",
                                           "timeout", "registry"};
constexpr std::string_view kSidecarFields[] = {"name",    "description", "run",  "image",
                                               "cmd",     "entrypoint",  "env",  "files",
                                               "timeout", "registry",    "probe"};
constexpr std::string_view kRetryFields[] = {
    "limit", "attempts", "initialDelay", "scalingFactor", "maxDelay", "on", "jitter"};
constexpr std::string_view kRetryOnFields[] = {"exitCodes", "errors"};
constexpr std::string_view kLimitsFields[] = {"cpus", "memory"};
constexpr std::string_view kMountFields[] = {"type", "source", "target", "opts"};
constexpr std::string_view kRegistryFields[] = {"username", "password"};
constexpr std::string_view kProbeFields[] = {"path", "port", "timeout"};
constexpr std::string_view kWebhookFields[] = {"url", "headers", "event", "if", "secret"};
constexpr std::string_view kAutoDeleteFields[] = {"after"};
constexpr std::string_view kWaitFields[] = {"timeout"};
constexpr std::string_view kDefaultsFields[] = {"retry", "limits", "timeout", "queue", "priority"};
constexpr std::string_view kParallelFields[] = {"tasks"};
constexpr std::string_view kEachFields[] = {"list", "task", "var", "concurrency"};
constexpr std::string_view kSwitchFields[] = {"value", "cases", "default"};
constexpr std::string_view kLoopFields[] = {"tasks", "while", "until", "max"};
constexpr std::string_view kTaskWaitFields[] = {"for", "until", "signal", "timeout"};
constexpr std::string_view kSubJobFields[] = {"name",     "description", "tasks",      "inputs",
                                              "secrets",  "output",      "autoDelete", "webhooks",
                                              "detached", "mode",        "onFailure",  "finally"};
constexpr std::string_view kPermissionFields[] = {"role", "user"};
constexpr std::string_view kNeedFields[] = {"task", "when"};

bool Contains(Fields fields, std::string_view name) {
  return std::find(fields.begin(), fields.end(), name) != fields.end();
}

// Edit distance, for "did you mean" hints on unknown fields.
std::size_t Distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (lower(a[i - 1]) != lower(b[j - 1]))});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Quoted(std::string_view s) { return fmt::format("\"{}\"", s); }

std::string Join(const std::string& path, std::string_view field) {
  return path.empty() ? std::string(field) : path + "." + std::string(field);
}

std::string Index(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

// Decodes a document tree into the model. One instance decodes one job; problems
// accumulate and decoding goes on past each, so the user sees them all at once.
class Decoder {
 public:
  explicit Decoder(DecodeMode mode = DecodeMode::kSubmitted,
                   int max_loop_iterations = kMaxLoopIterations)
      : rules_(mode == DecodeMode::kSubmitted), max_loop_iterations_(max_loop_iterations) {}

  std::vector<Diagnostic> problems;

  void Problem(Mark mark, const std::string& path, std::string message) {
    if (problems.size() < kMaxProblems) problems.push_back({mark, path, std::move(message)});
  }

  // Calls `handle(entry, path)` for each known field of a map; reports a non-map,
  // unknown fields and duplicate keys. Null values count as absent.
  template <typename Handler>
  bool ForEachField(const Node& node, const std::string& path, Fields known, Handler&& handle) {
    if (node.kind != Node::Kind::kMap) {
      Problem(node.mark, path, fmt::format("expected a map, got {}", Describe(node)));
      return false;
    }
    std::set<std::string_view> seen;
    for (const MapEntry& entry : node.entries) {
      std::string field_path = Join(path, entry.key);
      if (!seen.insert(entry.key).second) {
        Problem(entry.key_mark, field_path, "duplicate field " + Quoted(entry.key));
        continue;
      }
      if (!Contains(known, entry.key)) {
        Problem(entry.key_mark, field_path, UnknownField(entry.key, known));
        continue;
      }
      if (entry.value.kind == Node::Kind::kNull) continue;
      handle(entry, field_path);
    }
    return true;
  }

  std::string String(const Node& node, const std::string& path) {
    if (node.kind == Node::Kind::kNull) return "";
    if (!node.IsScalar()) {
      Problem(node.mark, path, fmt::format("expected a string, got {}", Describe(node)));
      return "";
    }
    return node.text;
  }

  // A string that may hold `{{ }}` templates: checked for balanced braces and syntax.
  std::string Template(const Node& node, const std::string& path) {
    std::string text = String(node, path);
    CheckTemplateText(text, node.mark, path);
    return text;
  }

  // An each's list: a template, or (as Tork takes it) a bare expression, checked as one.
  std::string EachList(const Node& node, const std::string& path) {
    std::string text = String(node, path);
    if (!rules_ || expr::HasTemplate(text) || text.find("}}") != std::string::npos) {
      CheckTemplateText(text, node.mark, path);
    } else if (!text.empty()) {
      Status status = expr::CheckExpression(text);
      if (!status.ok()) Problem(node.mark, path, "malformed expression: " + status.message());
    }
    return text;
  }

  void CheckTemplateText(const std::string& text, Mark mark, const std::string& path) {
    if (!rules_) return;
    if (text.find("{{") == std::string::npos && text.find("}}") == std::string::npos) return;
    Status status = expr::CheckTemplate(text);
    if (!status.ok()) Problem(mark, path, "malformed template: " + status.message());
  }

  std::optional<std::int64_t> Int(const Node& node, const std::string& path) {
    if (node.kind == Node::Kind::kInt) {
      std::int64_t value = 0;
      std::string_view text = node.text;
      int base = 10;
      if (text.starts_with("0x"))
        text.remove_prefix(2), base = 16;
      else if (text.starts_with("0o"))
        text.remove_prefix(2), base = 8;
      else if (text.starts_with("+"))
        text.remove_prefix(1);
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
      if (ec == std::errc() && ptr == text.data() + text.size()) return value;
      Problem(node.mark, path, fmt::format("number {} is out of range", node.text));
      return std::nullopt;
    }
    if (node.kind == Node::Kind::kFloat) {
      double d = std::strtod(node.text.c_str(), nullptr);
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
        return static_cast<std::int64_t>(d);
      }
    }
    Problem(node.mark, path, fmt::format("expected an integer, got {}", Describe(node)));
    return std::nullopt;
  }

  std::optional<int> IntInRange(const Node& node, const std::string& path, int lo, int hi) {
    auto value = Int(node, path);
    if (!value) return std::nullopt;
    if (*value < lo || *value > hi) {
      Problem(node.mark, path, fmt::format("must be between {} and {}, got {}", lo, hi, *value));
      return std::nullopt;
    }
    return static_cast<int>(*value);
  }

  std::optional<double> Number(const Node& node, const std::string& path) {
    if (node.kind == Node::Kind::kInt || node.kind == Node::Kind::kFloat ||
        node.kind == Node::Kind::kString) {
      const char* begin = node.text.c_str();
      char* end = nullptr;
      double d = std::strtod(begin, &end);
      if (!node.text.empty() && end == begin + node.text.size() && std::isfinite(d)) return d;
    }
    Problem(node.mark, path, fmt::format("expected a number, got {}", Describe(node)));
    return std::nullopt;
  }

  bool Bool(const Node& node, const std::string& path) {
    if (node.kind == Node::Kind::kBool) {
      return node.text == "true" || node.text == "True" || node.text == "TRUE";
    }
    Problem(node.mark, path, fmt::format("expected true or false, got {}", Describe(node)));
    return false;
  }

  std::optional<Duration> DurationOf(const Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      Problem(node.mark, path, fmt::format("expected a duration, got {}", Describe(node)));
      return std::nullopt;
    }
    auto d = ParseDuration(node.text);
    if (!d.ok()) {
      Problem(node.mark, path, d.status().message());
      return std::nullopt;
    }
    return *d;
  }

  std::vector<std::string> StringList(const Node& node, const std::string& path, bool templated) {
    std::vector<std::string> out;
    if (node.kind != Node::Kind::kSequence) {
      Problem(node.mark, path, fmt::format("expected a list of strings, got {}", Describe(node)));
      return out;
    }
    for (std::size_t i = 0; i < node.items.size(); ++i) {
      std::string item_path = Index(path, i);
      out.push_back(templated ? Template(node.items[i], item_path)
                              : String(node.items[i], item_path));
    }
    return out;
  }

  StringMap Map(const Node& node, const std::string& path, bool templated) {
    StringMap out;
    if (node.kind != Node::Kind::kMap) {
      Problem(node.mark, path, fmt::format("expected a map of strings, got {}", Describe(node)));
      return out;
    }
    for (const MapEntry& entry : node.entries) {
      std::string entry_path = Join(path, entry.key);
      if (entry.key.empty()) {
        Problem(entry.key_mark, path, "keys must not be empty");
        continue;
      }
      if (out.contains(entry.key)) {
        Problem(entry.key_mark, entry_path, "duplicate key " + Quoted(entry.key));
        continue;
      }
      out[entry.key] =
          templated ? Template(entry.value, entry_path) : String(entry.value, entry_path);
    }
    return out;
  }

  // `files`: a map whose keys must be plain file names.
  StringMap Files(const Node& node, const std::string& path) {
    StringMap out = Map(node, path, false);
    if (node.kind != Node::Kind::kMap) return out;
    for (const MapEntry& entry : node.entries) {
      if (entry.key.empty()) continue;  // reported by Map
      if (auto problem = FileNameProblem(entry.key)) {
        Problem(entry.key_mark, Join(path, entry.key), *problem);
      }
    }
    return out;
  }

  // `env`: a map of templates whose keys must be environment variable names.
  StringMap Env(const Node& node, const std::string& path) {
    StringMap out = Map(node, path, true);
    if (node.kind != Node::Kind::kMap) return out;
    for (const MapEntry& entry : node.entries) {
      if (auto problem = EnvNameProblem(entry.key)) {
        Problem(entry.key_mark, Join(path, entry.key), *problem);
      }
    }
    return out;
  }

  template <typename T, typename DecodeOne>
  std::vector<T> List(const Node& node, const std::string& path, DecodeOne&& decode_one) {
    std::vector<T> out;
    if (node.kind != Node::Kind::kSequence) {
      Problem(node.mark, path, fmt::format("expected a list, got {}", Describe(node)));
      return out;
    }
    out.reserve(node.items.size());
    for (std::size_t i = 0; i < node.items.size(); ++i) {
      out.push_back(decode_one(node.items[i], Index(path, i)));
    }
    return out;
  }

  std::string Queue(const Node& node, const std::string& path) {
    std::string queue = Template(node, path);
    if (rules_ && !expr::HasTemplate(queue)) {
      if (auto problem = QueueProblem(queue)) {
        Problem(node.mark, path, fmt::format("queue {} {}", Quoted(queue), *problem));
      }
    }
    return queue;
  }

  Retry DecodeRetry(const Node& node, const std::string& path) {
    Retry retry;
    bool has_limit = false;
    ForEachField(node, path, kRetryFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "limit") {
        has_limit = true;
        retry.limit = IntInRange(e.value, p, kMinRetryLimit, kMaxRetryLimit).value_or(0);
      } else if (e.key == "attempts") {
        retry.attempts = IntInRange(e.value, p, 0, 1'000'000).value_or(0);
      } else if (e.key == "initialDelay") {
        retry.initial_delay = DurationOf(e.value, p);
      } else if (e.key == "maxDelay") {
        retry.max_delay = DurationOf(e.value, p);
      } else if (e.key == "scalingFactor") {
        retry.scaling_factor = Number(e.value, p);
        if (retry.scaling_factor && (*retry.scaling_factor < 1 || *retry.scaling_factor > 100)) {
          Problem(e.value.mark, p, fmt::format("must be between 1 and 100, got {}", e.value.text));
          retry.scaling_factor.reset();
        }
      } else if (e.key == "jitter") {
        retry.jitter = DurationOf(e.value, p);
      } else if (e.key == "on") {
        retry.on = DecodeRetryOn(e.value, p);
      }
    });
    if (!has_limit && node.kind == Node::Kind::kMap) {
      Problem(node.mark, Join(path, "limit"),
              fmt::format("is required (between {} and {})", kMinRetryLimit, kMaxRetryLimit));
    }
    return retry;
  }

  // `retry.on`: exit codes 1..255 and reasons other than "exit" (which exitCodes say).
  RetryOn DecodeRetryOn(const Node& node, const std::string& path) {
    RetryOn on;
    bool named = false;  // an item given (valid or not: a wrong one is reported itself)
    ForEachField(node, path, kRetryOnFields, [&](const MapEntry& e, const std::string& p) {
      named = named || e.value.kind != Node::Kind::kSequence || !e.value.items.empty();
      if (e.value.kind != Node::Kind::kSequence) {
        Problem(e.value.mark, p, fmt::format("expected a list, got {}", Describe(e.value)));
        return;
      }
      for (std::size_t i = 0; i < e.value.items.size(); ++i) {
        const Node& item = e.value.items[i];
        const std::string q = Index(p, i);
        if (e.key == "exitCodes") {
          if (auto code = IntInRange(item, q, 1, 255)) on.exit_codes.push_back(*code);
          continue;
        }
        std::string text = String(item, q);
        auto reason = ParseFailReason(text);
        if (!reason || *reason == FailReason::kExit) {
          if (item.IsScalar()) {
            Problem(item.mark, q,
                    fmt::format("unknown error {} (expected timeout, oom, lost or error; an "
                                "exit code goes in exitCodes)",
                                Quoted(text)));
          }
          continue;
        }
        on.errors.push_back(*reason);
      }
    });
    if (node.kind == Node::Kind::kMap && !named && rules_) {
      Problem(node.mark, path, "names no failure to retry: give exitCodes, errors or both");
    }
    return on;
  }

  Limits DecodeLimits(const Node& node, const std::string& path) {
    Limits limits;
    ForEachField(node, path, kLimitsFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "cpus") {
        limits.cpus = Number(e.value, p);
        if (limits.cpus && *limits.cpus <= 0) {
          Problem(e.value.mark, p, fmt::format("must be more than 0, got {}", e.value.text));
          limits.cpus.reset();
        }
      } else if (e.key == "memory") {
        auto bytes = ParseMemory(String(e.value, p));
        if (bytes.ok()) {
          limits.memory = *bytes;
        } else {
          Problem(e.value.mark, p, bytes.status().message());
        }
      }
    });
    return limits;
  }

  // What Tork lets a mount's source and target hold: letters, digits, space and - . _ / =
  // (nothing a shell, a Docker mount option or a path walk could read more into).
  static bool MountPathCharsOk(std::string_view path) {
    return std::all_of(path.begin(), path.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '-' || c == '/' || c == '.' || c == '_' || c == '=' || c == ' ';
    });
  }
  static std::string MountCharsProblem(const std::string& path) {
    return fmt::format("{} may hold only letters, digits, space and - . _ / = (as Tork's mounts)",
                       Quoted(path));
  }

  Mount DecodeMount(const Node& node, const std::string& path) {
    Mount mount;
    bool has_type = false;
    Mark source_mark = node.mark;
    Mark target_mark = node.mark;
    ForEachField(node, path, kMountFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "type") {
        std::string type = String(e.value, p);
        if (auto t = ParseMountType(type)) {
          mount.type = *t;
          has_type = true;
        } else {
          Problem(
              e.value.mark, p,
              fmt::format("unknown mount type {} (expected volume, bind or tmpfs)", Quoted(type)));
        }
      } else if (e.key == "source") {
        mount.source = String(e.value, p);
        source_mark = e.value.mark;
      } else if (e.key == "target") {
        mount.target = String(e.value, p);
        target_mark = e.value.mark;
      } else if (e.key == "opts") {
        mount.opts = Map(e.value, p, false);
      }
    });
    if (node.kind != Node::Kind::kMap) return mount;
    if (!has_type) {
      if (!std::any_of(node.entries.begin(), node.entries.end(),
                       [](const MapEntry& e) { return e.key == "type"; })) {
        Problem(node.mark, Join(path, "type"), "is required (volume, bind or tmpfs)");
      }
      return mount;
    }
    if (mount.type == MountType::kBind && mount.source.empty()) {
      Problem(node.mark, Join(path, "source"), "a bind mount needs a source");
    } else if (mount.type != MountType::kBind && !mount.source.empty()) {
      Problem(source_mark, Join(path, "source"),
              fmt::format("a {} mount cannot have a source", ToString(mount.type)));
    } else if (!MountPathCharsOk(mount.source)) {
      Problem(source_mark, Join(path, "source"), MountCharsProblem(mount.source));
    }
    if (!mount.target.empty() && !MountPathCharsOk(mount.target)) {
      Problem(target_mark, Join(path, "target"), MountCharsProblem(mount.target));
    } else if (mount.target.empty()) {
      Problem(node.mark, Join(path, "target"), "is required");
    } else if (mount.target[0] != '/') {
      Problem(target_mark, Join(path, "target"),
              fmt::format("must be an absolute path, got {}", Quoted(mount.target)));
    } else if (IsReservedMountTarget(mount.target)) {
      Problem(target_mark, Join(path, "target"),
              fmt::format("{} is reserved for the engine's own files", Quoted(mount.target)));
    }
    return mount;
  }

  Registry DecodeRegistry(const Node& node, const std::string& path) {
    Registry registry;
    ForEachField(node, path, kRegistryFields, [&](const MapEntry& e, const std::string& p) {
      (e.key == "username" ? registry.username : registry.password) = String(e.value, p);
    });
    return registry;
  }

  Probe DecodeProbe(const Node& node, const std::string& path) {
    Probe probe;
    ForEachField(node, path, kProbeFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "path") probe.path = String(e.value, p);
      if (e.key == "port") probe.port = IntInRange(e.value, p, 1, 65535).value_or(0);
      if (e.key == "timeout") probe.timeout = DurationOf(e.value, p);
    });
    return probe;
  }

  AuxTask DecodeAux(const Node& node, const std::string& path, bool sidecar) {
    AuxTask aux;
    ForEachField(node, path, sidecar ? Fields(kSidecarFields) : Fields(kAuxFields),
                 [&](const MapEntry& e, const std::string& p) {
                   const Node& v = e.value;
                   if (e.key == "name")
                     aux.name = Template(v, p);
                   else if (e.key == "description")
                     aux.description = String(v, p);
                   else if (e.key == "run")
                     aux.run = String(v, p);
                   else if (e.key == "image")
                     aux.image = Template(v, p);
                   else if (e.key == "cmd")
                     aux.cmd = StringList(v, p, true);
                   else if (e.key == "entrypoint")
                     aux.entrypoint = StringList(v, p, true);
                   else if (e.key == "env")
                     aux.env = Env(v, p);
                   else if (e.key == "files")
                     aux.files = Files(v, p);
                   else if (e.key == "timeout")
                     aux.timeout = DurationOf(v, p);
                   else if (e.key == "probe")
                     aux.probe = DecodeProbe(v, p);
                   else if (e.key == "registry")
                     aux.registry = DecodeRegistry(v, p);
                 });
    if (node.kind == Node::Kind::kMap && aux.name.empty()) {
      Problem(node.mark, Join(path, "name"), "is required");
    }
    return aux;
  }

  Webhook DecodeWebhook(const Node& node, const std::string& path) {
    Webhook hook;
    ForEachField(node, path, kWebhookFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "url") hook.url = Template(e.value, p);
      if (e.key == "headers") hook.headers = Map(e.value, p, true);
      if (e.key == "event") {
        hook.event = String(e.value, p);
        auto events = WebhookEvents();
        if (!hook.event.empty() &&
            std::find(events.begin(), events.end(), hook.event) == events.end()) {
          Problem(e.value.mark, p,
                  fmt::format("{} is not an event: use job.StateChange, job.Progress, "
                              "task.StateChange or task.Progress",
                              Quoted(hook.event)));
        }
      }
      if (e.key == "if") hook.if_expr = Template(e.value, p);
      if (e.key == "secret") hook.secret = Template(e.value, p);
    });
    if (node.kind == Node::Kind::kMap && hook.url.empty()) {
      Problem(node.mark, Join(path, "url"), "a webhook needs a url");
    } else if (!hook.url.empty() && !expr::HasTemplate(hook.url) &&
               !hook.url.starts_with("http://") && !hook.url.starts_with("https://")) {
      Problem(node.mark, Join(path, "url"),
              fmt::format("must be an http:// or https:// URL, got {}", Quoted(hook.url)));
    }
    return hook;
  }

  AutoDelete DecodeAutoDelete(const Node& node, const std::string& path) {
    AutoDelete auto_delete;
    ForEachField(node, path, kAutoDeleteFields, [&](const MapEntry& e, const std::string& p) {
      auto_delete.after = DurationOf(e.value, p).value_or(Duration::zero());
    });
    return auto_delete;
  }

  Defaults DecodeDefaults(const Node& node, const std::string& path) {
    Defaults defaults;
    ForEachField(node, path, kDefaultsFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "retry") defaults.retry = DecodeRetry(e.value, p);
      if (e.key == "limits") defaults.limits = DecodeLimits(e.value, p);
      if (e.key == "timeout") defaults.timeout = DurationOf(e.value, p);
      if (e.key == "queue") defaults.queue = Queue(e.value, p);
      if (e.key == "priority") defaults.priority = IntInRange(e.value, p, 0, kMaxPriority);
    });
    return defaults;
  }

  // `needs`: names, or {task, when} edges.
  std::vector<Need> Needs(const Node& node, const std::string& path) {
    return List<Need>(node, path, [&](const Node& n, const std::string& p) {
      Need need;
      if (n.kind != Node::Kind::kMap) {
        need.task = String(n, p);
        return need;
      }
      ForEachField(n, p, kNeedFields, [&](const MapEntry& e, const std::string& q) {
        if (e.key == "task") need.task = String(e.value, q);
        if (e.key == "when") need.when = Template(e.value, q);
      });
      if (need.task.empty()) Problem(n.mark, Join(p, "task"), "a need names a task");
      return need;
    });
  }

  TaskOrder DecodeMode(const Node& node, const std::string& path) {
    std::string text = String(node, path);
    if (text == "dag") return TaskOrder::kDag;
    if (text != "sequence") {
      Problem(node.mark, path,
              fmt::format("unknown mode {} (expected sequence or dag)", Quoted(text)));
    }
    return TaskOrder::kSequence;
  }

  std::optional<TriggerRule> DecodeTriggerRule(const Node& node, const std::string& path) {
    std::string text = String(node, path);
    auto rule = ParseTriggerRule(text);
    if (!rule && node.IsScalar()) {
      Problem(node.mark, path,
              fmt::format("unknown trigger rule {} (expected one of {})", Quoted(text),
                          TriggerRuleNames()));
    }
    return rule;
  }

  static const MapEntry* EntryOf(const Node& node, std::string_view key) {
    if (node.kind != Node::Kind::kMap) return nullptr;
    for (const MapEntry& e : node.entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  }

  // `needs` and `triggerRule` order a job's, a sub-job's or a parallel's tasks: an each's
  // task has no list to be ordered in, a switch's or a loop's are run in their order.
  void NoGraphFields(const Node& task_node, const std::string& path, std::string_view owner) {
    for (std::string_view key : {std::string_view("needs"), std::string_view("triggerRule")}) {
      if (const MapEntry* e = EntryOf(task_node, key)) {
        Problem(e->key_mark, Join(path, key),
                fmt::format("{} orders the tasks of a job, a subjob or a parallel, not of {}", key,
                            owner));
      }
    }
  }

  // A graph's tasks (see core/graph.h): names unique, every need a task of the list, no
  // cycle.
  void CheckGraph(const Node* list, const std::string& path, TaskOrder mode,
                  const std::vector<Task>& tasks) {
    if (!rules_ || list == nullptr || list->kind != Node::Kind::kSequence ||
        list->items.size() != tasks.size() || !IsGraph(mode, tasks)) {
      return;
    }
    std::map<std::string, std::size_t> first;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const std::string& name = tasks[i].name;
      if (name.empty()) continue;  // reported: a task needs a name
      auto [at, fresh] = first.emplace(name, i);
      if (fresh) continue;
      const MapEntry* e = EntryOf(list->items[i], "name");
      Problem(e != nullptr ? e->value.mark : list->items[i].mark, Join(Index(path, i), "name"),
              fmt::format("{} names {} too: the tasks of a graph need unique names", Quoted(name),
                          Index(path, at->second)));
    }
    bool unknown = false;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const MapEntry* e = EntryOf(list->items[i], "needs");
      if (e == nullptr || e->value.kind != Node::Kind::kSequence) continue;
      for (std::size_t j = 0; j < tasks[i].needs.size() && j < e->value.items.size(); ++j) {
        const std::string& need = tasks[i].needs[j].task;
        if (need.empty() || first.contains(need)) continue;
        unknown = true;
        std::string message = fmt::format("no task of {} is named {}", path, Quoted(need));
        std::string_view best;
        std::size_t best_distance = 3;
        for (const auto& [name, index] : first) {
          std::size_t d = Distance(need, name);
          // Not a hint of one name for another that shares no letter with it.
          if (d < best_distance && d < need.size()) best = name, best_distance = d;
        }
        if (!best.empty()) message += fmt::format(" (did you mean {}?)", Quoted(best));
        const Node& item = e->value.items[j];
        const MapEntry* named = EntryOf(item, "task");
        Problem(named != nullptr ? named->value.mark : item.mark,
                Index(Join(Index(path, i), "needs"), j), message);
      }
    }
    if (unknown) return;
    auto cycle = FindCycle(GraphOf(mode, tasks));
    if (!cycle) return;
    std::string along;
    for (int i : *cycle) {
      if (!along.empty()) along += " -> ";
      along += Quoted(tasks[static_cast<std::size_t>(i)].name);
    }
    const std::size_t at = static_cast<std::size_t>(cycle->front());
    const MapEntry* e = EntryOf(list->items[at], "needs");
    Problem(e != nullptr ? e->key_mark : list->items[at].mark, Join(Index(path, at), "needs"),
            fmt::format("the tasks' needs form a cycle: {}", along));
  }

  std::vector<Task> Tasks(const Node& node, const std::string& path, int depth,
                          std::string_view owner) {
    auto tasks = List<Task>(node, path, [&](const Node& n, const std::string& p) {
      return DecodeTask(n, p, depth + 1);
    });
    if (node.kind == Node::Kind::kSequence && node.items.empty()) {
      Problem(node.mark, path, fmt::format("{} needs at least one task", owner));
    }
    return tasks;
  }

  Task DecodeTask(const Node& node, const std::string& path, int depth) {
    Task task;
    if (depth > kMaxDocumentDepth) {
      Problem(node.mark, path, "tasks nested too deeply");
      return task;
    }
    std::vector<const MapEntry*> composite;
    std::vector<const MapEntry*> runnable;
    Fields fields = rules_ ? Fields(kTaskFields) : Fields(kStoredTaskFields);
    bool ok = ForEachField(node, path, fields, [&](const MapEntry& e, const std::string& p) {
      const Node& v = e.value;
      if (Contains(kRunnableFields, e.key)) runnable.push_back(&e);
      if (e.key == "name")
        task.name = Template(v, p);
      else if (e.key == "description")
        task.description = String(v, p);
      else if (e.key == "var") {
        task.var = Template(v, p);
        if (rules_) {
          if (auto problem = VarProblem(task.var)) Problem(v.mark, p, *problem);
        }
      } else if (e.key == "if")
        task.if_expr = Template(v, p);
      else if (e.key == "run")
        task.run = String(v, p);
      else if (e.key == "image")
        task.image = Template(v, p);
      else if (e.key == "cmd")
        task.cmd = StringList(v, p, true);
      else if (e.key == "entrypoint")
        task.entrypoint = StringList(v, p, true);
      else if (e.key == "env")
        task.env = Env(v, p);
      else if (e.key == "files")
        task.files = Files(v, p);
      else if (e.key == "workdir")
        task.workdir = Template(v, p);
      else if (e.key == "queue")
        task.queue = Queue(v, p);
      else if (e.key == "priority")
        task.priority = IntInRange(v, p, 0, kMaxPriority);
      else if (e.key == "pre") {
        task.pre = List<AuxTask>(
            v, p, [&](const Node& n, const std::string& q) { return DecodeAux(n, q, false); });
      } else if (e.key == "post") {
        task.post = List<AuxTask>(
            v, p, [&](const Node& n, const std::string& q) { return DecodeAux(n, q, false); });
      } else if (e.key == "sidecars") {
        task.sidecars = List<AuxTask>(
            v, p, [&](const Node& n, const std::string& q) { return DecodeAux(n, q, true); });
      } else if (e.key == "mounts") {
        task.mounts = List<Mount>(
            v, p, [&](const Node& n, const std::string& q) { return DecodeMount(n, q); });
      } else if (e.key == "networks")
        task.networks = StringList(v, p, false);
      else if (e.key == "limits")
        task.limits = DecodeLimits(v, p);
      else if (e.key == "gpus")
        task.gpus = String(v, p);
      else if (e.key == "registry")
        task.registry = DecodeRegistry(v, p);
      else if (e.key == "tags")
        task.tags = StringList(v, p, false);
      else if (e.key == "timeout")
        task.timeout = DurationOf(v, p);
      else if (e.key == "retry")
        task.retry = DecodeRetry(v, p);
      else if (e.key == "needs")
        task.needs = Needs(v, p);
      else if (e.key == "triggerRule")
        task.trigger_rule = DecodeTriggerRule(v, p);
      else if (e.key == "optional")
        task.optional = Bool(v, p);
      else if (e.key == "pauseBefore")
        task.pause_before = Bool(v, p);
      else if (e.key == "onFailure")
        task.on_failure = DecodeOnFailure(v, p, depth);
      else if (e.key == "handles") {
        std::string text = String(v, p);
        auto handles = ParseHandles(text);
        if (!handles) {
          Problem(v.mark, p, fmt::format("unknown handler {}", Quoted(text)));
        } else {
          task.handles = *handles;
        }
      } else if (e.key == "parallel") {
        composite.push_back(&e);
        task.parallel = DecodeParallel(v, p, depth);
      } else if (e.key == "each") {
        composite.push_back(&e);
        task.each = DecodeEach(v, p, depth);
      } else if (e.key == "subjob") {
        composite.push_back(&e);
        task.subjob = DecodeSubJob(v, p, depth);
      } else if (e.key == "switch") {
        composite.push_back(&e);
        task.switch_ = DecodeSwitch(v, p, depth);
      } else if (e.key == "loop") {
        composite.push_back(&e);
        task.loop = DecodeLoop(v, p, depth);
      } else if (e.key == "wait") {
        composite.push_back(&e);
        task.wait = DecodeWait(v, p);
      }
    });
    if (!ok) return task;
    if (rules_ && task.name.empty()) Problem(node.mark, Join(path, "name"), "a task needs a name");
    if (composite.size() > 1) {
      Problem(
          composite[1]->key_mark, Join(path, composite[1]->key),
          fmt::format("a task can be only one of parallel, each, subjob, switch, loop or wait, but "
                      "this one also has {}",
                      composite[0]->key));
    }
    if (!composite.empty()) {
      for (const MapEntry* e : runnable) {
        Problem(e->key_mark, Join(path, e->key),
                composite[0]->key == "wait"
                    ? fmt::format("a wait task cannot have {}: it runs nothing", e->key)
                    : fmt::format("a {} task cannot have {}: it belongs on the tasks it runs",
                                  composite[0]->key, e->key));
      }
    }
    return task;
  }

  Parallel DecodeParallel(const Node& node, const std::string& path, int depth) {
    Parallel parallel;
    bool has_tasks = false;
    ForEachField(node, path, kParallelFields, [&](const MapEntry& e, const std::string& p) {
      has_tasks = true;
      parallel.tasks = Tasks(e.value, p, depth, "a parallel");
      // With needs, its tasks form a graph whose roots are the tasks that need nothing.
      if (IsGraph(parallel)) CheckGraph(&e.value, p, TaskOrder::kDag, parallel.tasks);
    });
    if (node.kind == Node::Kind::kMap && !has_tasks) {
      Problem(node.mark, Join(path, "tasks"), "a parallel needs at least one task");
    }
    return parallel;
  }

  Each DecodeEach(const Node& node, const std::string& path, int depth) {
    Each each;
    bool has_task = false;
    ForEachField(node, path, kEachFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "list") each.list = EachList(e.value, p);
      if (e.key == "var") {
        each.var = String(e.value, p);
        if (!IsIdentifier(each.var)) {
          Problem(e.value.mark, p,
                  fmt::format("must be a name of letters, digits and _, got {}", Quoted(each.var)));
        }
      }
      if (e.key == "concurrency") {
        each.concurrency = IntInRange(e.value, p, 0, kMaxEachConcurrency).value_or(0);
      }
      if (e.key == "task") {
        has_task = true;
        *each.task = DecodeTask(e.value, p, depth + 1);
        NoGraphFields(e.value, p, "an each");
      }
    });
    if (node.kind == Node::Kind::kMap) {
      if (each.list.empty()) Problem(node.mark, Join(path, "list"), "an each needs a list");
      if (!has_task) Problem(node.mark, Join(path, "task"), "an each needs a task");
    }
    return each;
  }

  // A switch's case or default, or a loop's tasks: run one after another, not ordered
  // by needs. A switch's case may be empty (that value does nothing).
  std::vector<Task> Branch(const Node& node, const std::string& path, int depth,
                           std::string_view owner, bool may_be_empty) {
    std::vector<Task> tasks;
    if (may_be_empty && node.kind == Node::Kind::kSequence && node.items.empty()) return tasks;
    tasks = Tasks(node, path, depth, owner);
    if (node.kind == Node::Kind::kSequence) {
      for (std::size_t i = 0; i < node.items.size(); ++i) {
        NoGraphFields(node.items[i], Index(path, i), owner);
      }
    }
    return tasks;
  }

  // `onFailure`: its tasks, or {tasks, then}.
  OnFailure DecodeOnFailure(const Node& node, const std::string& path, int depth) {
    OnFailure out;
    if (node.kind != Node::Kind::kMap) {
      out.tasks = Branch(node, path, depth, "onFailure", false);
      return out;
    }
    bool has_tasks = false;
    ForEachField(node, path, kOnFailureFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "tasks") {
        has_tasks = true;
        out.tasks = Branch(e.value, p, depth, "onFailure", false);
        return;
      }
      std::string text = String(e.value, p);
      if (text == "continue") {
        out.then = Then::kContinue;
      } else if (text != "fail" && e.value.IsScalar()) {
        Problem(e.value.mark, p,
                fmt::format("unknown then {} (expected fail or continue)", Quoted(text)));
      }
    });
    if (!has_tasks) Problem(node.mark, Join(path, "tasks"), "onFailure needs at least one task");
    return out;
  }

  Switch DecodeSwitch(const Node& node, const std::string& path, int depth) {
    Switch sw;
    bool has_value = false;
    bool has_branch = false;
    ForEachField(node, path, kSwitchFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "value") {
        has_value = true;
        sw.value = EachList(e.value, p);
      } else if (e.key == "default") {
        has_branch = true;
        sw.default_tasks = Branch(e.value, p, depth, "a switch", true);
      } else if (e.key == "cases") {
        has_branch = true;
        if (e.value.kind != Node::Kind::kMap) {
          Problem(e.value.mark, p,
                  fmt::format("expected a map of values to tasks, got {}", Describe(e.value)));
          return;
        }
        std::set<std::string_view> seen;
        for (const MapEntry& c : e.value.entries) {
          std::string q = Join(p, c.key);
          if (!seen.insert(c.key).second) {
            Problem(c.key_mark, q, "duplicate case " + Quoted(c.key));
            continue;
          }
          sw.cases.push_back({c.key, Branch(c.value, q, depth, "a switch", true)});
        }
        // Sorted by key, as the JSON form keeps them (a key is matched, never ordered).
        std::sort(sw.cases.begin(), sw.cases.end(),
                  [](const SwitchCase& a, const SwitchCase& b) { return a.key < b.key; });
      }
    });
    if (node.kind == Node::Kind::kMap) {
      if (!has_value || sw.value.empty()) {
        Problem(node.mark, Join(path, "value"), "a switch needs a value");
      }
      if (!has_branch) {
        Problem(node.mark, Join(path, "cases"), "a switch needs cases or a default");
      }
    }
    return sw;
  }

  Loop DecodeLoop(const Node& node, const std::string& path, int depth) {
    Loop loop;
    bool has_tasks = false;
    const MapEntry* while_entry = nullptr;
    const MapEntry* until_entry = nullptr;
    bool has_max = false;
    ForEachField(node, path, kLoopFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "tasks") {
        has_tasks = true;
        loop.tasks = Branch(e.value, p, depth, "a loop", false);
      } else if (e.key == "while") {
        while_entry = &e;
        loop.while_expr = Template(e.value, p);
      } else if (e.key == "until") {
        until_entry = &e;
        loop.until_expr = Template(e.value, p);
      } else if (e.key == "max") {
        has_max = true;
        loop.max = IntInRange(e.value, p, 1, kMaxLoopIterations).value_or(0);
        if (rules_ && loop.max > max_loop_iterations_) {
          Problem(e.value.mark, p,
                  fmt::format("{} is over this engine's limit of {} iterations "
                              "(coordinator.max_loop_iterations)",
                              loop.max, max_loop_iterations_));
        }
      }
    });
    if (node.kind == Node::Kind::kMap) {
      if (!has_tasks) Problem(node.mark, Join(path, "tasks"), "a loop needs at least one task");
      if (!has_max) {
        Problem(node.mark, Join(path, "max"),
                "a loop needs max, the most iterations it may run (it stops there)");
      }
      if (while_entry != nullptr && until_entry != nullptr) {
        Problem(until_entry->key_mark, Join(path, "until"),
                "a loop takes while or until, not both");
      }
    }
    return loop;
  }

  Wait DecodeWait(const Node& node, const std::string& path) {
    Wait wait;
    std::vector<const MapEntry*> what;  // for, until, signal: exactly one
    const MapEntry* timeout = nullptr;
    ForEachField(node, path, kTaskWaitFields, [&](const MapEntry& e, const std::string& p) {
      if (e.key == "for") {
        what.push_back(&e);
        wait.for_ = DurationOf(e.value, p);
      } else if (e.key == "until") {
        what.push_back(&e);
        wait.until = Template(e.value, p);
        if (!expr::HasTemplate(wait.until) && !ParseTime(wait.until)) {
          Problem(e.value.mark, p,
                  fmt::format("expected a time (RFC 3339, as 2026-01-02T15:04:05Z) or a "
                              "template, got {}",
                              Quoted(wait.until)));
        }
      } else if (e.key == "signal") {
        what.push_back(&e);
        wait.signal = String(e.value, p);
        if (!IsIdentifier(wait.signal)) {
          Problem(
              e.value.mark, p,
              fmt::format("must be a name of letters, digits and _, got {}", Quoted(wait.signal)));
        }
      } else if (e.key == "timeout") {
        timeout = &e;
        wait.timeout = DurationOf(e.value, p);
      }
    });
    if (node.kind == Node::Kind::kMap) {
      if (what.empty()) {
        Problem(node.mark, path, "a wait needs one of for, until or signal");
      } else if (what.size() > 1) {
        Problem(what[1]->key_mark, Join(path, what[1]->key),
                fmt::format("a wait takes one of for, until or signal, but this one also has {}",
                            what[0]->key));
      }
      if (timeout != nullptr && wait.signal.empty()) {
        Problem(timeout->key_mark, Join(path, "timeout"),
                "only a signal wait has a timeout (a for or until wait ends at its own time)");
      }
    }
    return wait;
  }

  SubJob DecodeSubJob(const Node& node, const std::string& path, int depth) {
    SubJob sub;
    bool has_tasks = false;
    const Node* tasks_node = nullptr;
    std::string tasks_path;
    ForEachField(node, path, kSubJobFields, [&](const MapEntry& e, const std::string& p) {
      const Node& v = e.value;
      if (e.key == "name")
        sub.name = Template(v, p);
      else if (e.key == "mode")
        sub.mode = DecodeMode(v, p);
      else if (e.key == "description")
        sub.description = String(v, p);
      else if (e.key == "tasks") {
        has_tasks = true;
        sub.tasks = Tasks(v, p, depth, "a subjob");
        tasks_node = &v;
        tasks_path = p;
      } else if (e.key == "inputs")
        sub.inputs = Map(v, p, true);
      else if (e.key == "secrets")
        sub.secrets = Map(v, p, true);
      else if (e.key == "output")
        sub.output = Template(v, p);
      else if (e.key == "autoDelete")
        sub.auto_delete = DecodeAutoDelete(v, p);
      else if (e.key == "webhooks") {
        sub.webhooks = List<Webhook>(
            v, p, [&](const Node& n, const std::string& q) { return DecodeWebhook(n, q); });
      } else if (e.key == "detached")
        sub.detached = Bool(v, p);
      else if (e.key == "onFailure")
        sub.on_failure = Branch(v, p, depth, "onFailure", false);
      else if (e.key == "finally")
        sub.finally = Branch(v, p, depth, "finally", false);
    });
    if (node.kind == Node::Kind::kMap) {
      if (sub.name.empty()) Problem(node.mark, Join(path, "name"), "a subjob needs a name");
      if (!has_tasks) Problem(node.mark, Join(path, "tasks"), "a subjob needs at least one task");
    }
    CheckGraph(tasks_node, tasks_path, sub.mode, sub.tasks);
    return sub;
  }

  Permission DecodePermission(const Node& node, const std::string& path) {
    Permission perm;
    ForEachField(node, path, kPermissionFields, [&](const MapEntry& e, const std::string& p) {
      std::string& name = e.key == "role" ? perm.role : perm.user;
      name = String(e.value, p);
      // Matched as text in the datastore's list of a user's jobs (AccessText).
      if (rules_ && !name.empty()) {
        if (Status valid = ValidateName(p, name); !valid.ok()) {
          Problem(e.value.mark, p, valid.message().substr(p.size() + 2));
        }
      }
    });
    if (node.kind == Node::Kind::kMap && perm.role.empty() == perm.user.empty()) {
      Problem(node.mark, path, "a permission names either a role or a user");
    }
    return perm;
  }

  Job DecodeJobRoot(const Node& node) {
    Job job;
    bool has_tasks = false;
    const Node* tasks_node = nullptr;
    Fields fields = rules_ ? Fields(kJobFields) : Fields(kStoredJobFields);
    bool ok = ForEachField(node, "", fields, [&](const MapEntry& e, const std::string& p) {
      const Node& v = e.value;
      if (e.key == "schedule") {
        JobSchedule schedule;
        ForEachField(v, p, kJobScheduleFields, [&](const MapEntry& f, const std::string& q) {
          (f.key == "id" ? schedule.id : schedule.cron) = String(f.value, q);
        });
        job.schedule = std::move(schedule);
      } else if (e.key == "name")
        job.name = String(v, p);
      else if (e.key == "mode")
        job.mode = DecodeMode(v, p);
      else if (e.key == "description")
        job.description = String(v, p);
      else if (e.key == "tags")
        job.tags = StringList(v, p, false);
      else if (e.key == "inputs")
        job.inputs = Map(v, p, false);
      else if (e.key == "secrets")
        job.secrets = Map(v, p, false);
      else if (e.key == "defaults")
        job.defaults = DecodeDefaults(v, p);
      else if (e.key == "output")
        job.output = Template(v, p);
      else if (e.key == "webhooks") {
        job.webhooks = List<Webhook>(
            v, p, [&](const Node& n, const std::string& q) { return DecodeWebhook(n, q); });
      } else if (e.key == "autoDelete")
        job.auto_delete = DecodeAutoDelete(v, p);
      else if (e.key == "wait") {
        ForEachField(v, p, kWaitFields, [&](const MapEntry& w, const std::string& q) {
          job.wait_timeout = DurationOf(w.value, q);
        });
        if (!job.wait_timeout) job.wait_timeout = Duration::zero();
      } else if (e.key == "timeout")
        job.timeout = DurationOf(v, p);
      else if (e.key == "permissions") {
        job.permissions = List<Permission>(
            v, p, [&](const Node& n, const std::string& q) { return DecodePermission(n, q); });
      } else if (e.key == "createdBy") {
        // Stored jobs carry it; a submission may not name its own creator.
        if (rules_) {
          Problem(v.mark, p, "is set by the server from the credentials, not by a job file");
        } else {
          job.created_by = String(v, p);
        }
      } else if (e.key == "tasks") {
        has_tasks = true;
        job.tasks = Tasks(v, p, 0, "a job");
        tasks_node = &v;
      } else if (e.key == "onFailure")
        job.on_failure = Branch(v, p, 0, "onFailure", false);
      else if (e.key == "finally")
        job.finally = Branch(v, p, 0, "finally", false);
    });
    if (!ok || !rules_) return job;
    if (job.name.empty()) Problem(node.mark, "name", "a job needs a name");
    if (!has_tasks) Problem(node.mark, "tasks", "a job needs at least one task");
    CheckGraph(tasks_node, "tasks", job.mode, job.tasks);
    return job;
  }

 private:
  bool rules_;               // false: check the shape only (DecodeMode::kStored)
  int max_loop_iterations_;  // the engine's bound on a loop's max

  static std::string Describe(const Node& node) {
    if (node.IsScalar() && node.kind != Node::Kind::kNull) {
      std::string text = node.text.size() > 40 ? node.text.substr(0, 40) + "..." : node.text;
      return fmt::format("{} {}", node.KindName(), Quoted(text));
    }
    return std::string(node.KindName());
  }

  static std::string UnknownField(std::string_view key, Fields known) {
    std::string_view best;
    std::size_t best_distance = 3;  // suggest only close matches
    for (std::string_view k : known) {
      std::size_t d = Distance(key, k);
      if (d < best_distance) best = k, best_distance = d;
    }
    std::string message = "unknown field " + Quoted(key);
    if (!best.empty()) message += fmt::format(" (did you mean {}?)", Quoted(best));
    return message;
  }
};

bool ByPosition(const Diagnostic& a, const Diagnostic& b) {
  if (a.mark.line != b.mark.line) return a.mark.line < b.mark.line;
  return a.mark.column < b.mark.column;
}

}  // namespace

std::string JobParseResult::Message() const {
  std::string out;
  for (const Diagnostic& d : problems) {
    if (!out.empty()) out += '\n';
    out += d.ToString();
  }
  return out;
}

std::optional<std::string> QueueProblem(std::string_view queue) {
  if (!IsReservedQueueName(queue)) return std::nullopt;
  return "is reserved for the engine (names starting with x- and the engine's own queues "
         "cannot carry tasks)";
}

std::optional<std::string> FileNameProblem(std::string_view name) {
  if (!name.empty() && name != "." && name != ".." && !name.starts_with(kReservedFilePrefix) &&
      name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos) {
    return std::nullopt;
  }
  return fmt::format(
      "a file name may not be empty, contain '/', be '.' or '..', or start with '{}': the "
      "files are written into the task's own directory",
      kReservedFilePrefix);
}

std::optional<std::string> EnvNameProblem(std::string_view name) {
  if (name.find('=') == std::string_view::npos && name.find('\0') == std::string_view::npos) {
    return std::nullopt;
  }
  return "an environment variable name may not contain '=' or NUL";
}

std::optional<std::string> VarProblem(std::string_view var) {
  if (var.size() <= kMaxVarLength) return std::nullopt;
  return fmt::format("must be at most {} characters, got {}", kMaxVarLength, var.size());
}

// A stored JSON text expands to no more than its own size, which is already in memory.
constexpr std::size_t kNoByteLimit = std::numeric_limits<std::size_t>::max();

Result<Job> DecodeJobJson(std::string_view json_text, DecodeMode mode) {
  ParsedDocument doc = ParseDocument(json_text, DocumentFormat::kJson, kNoByteLimit);
  if (doc.error) return InvalidArgument(doc.error->ToString());
  Decoder decoder(mode);
  Job job = decoder.DecodeJobRoot(*doc.root);
  if (!decoder.problems.empty()) {
    JobParseResult result;
    result.problems = std::move(decoder.problems);
    return InvalidArgument(result.Message());
  }
  return job;
}

JobParseResult DecodeJob(const Node& root, int max_loop_iterations) {
  Decoder decoder(DecodeMode::kSubmitted, max_loop_iterations);
  Job job = decoder.DecodeJobRoot(root);
  JobParseResult result;
  result.problems = std::move(decoder.problems);
  std::stable_sort(result.problems.begin(), result.problems.end(), ByPosition);
  if (result.problems.empty()) result.job = std::move(job);
  return result;
}

Result<Task> DecodeTaskJson(std::string_view json_text, DecodeMode mode) {
  ParsedDocument doc = ParseDocument(json_text, DocumentFormat::kJson, kNoByteLimit);
  if (doc.error) return InvalidArgument(doc.error->ToString());
  Decoder decoder(mode);
  Task task = decoder.DecodeTask(*doc.root, "", 0);
  if (!decoder.problems.empty()) {
    JobParseResult result;
    result.problems = std::move(decoder.problems);
    return InvalidArgument(result.Message());
  }
  return task;
}

JobParseResult ParseJob(std::string_view text, DocumentFormat format, std::size_t max_bytes,
                        int max_loop_iterations) {
  ParsedDocument doc = ParseDocument(text, format, max_bytes);
  if (doc.error) {
    JobParseResult result;
    result.problems.push_back(*doc.error);
    result.too_large = doc.too_large;
    return result;
  }
  return DecodeJob(*doc.root, max_loop_iterations);
}

}  // namespace baton
