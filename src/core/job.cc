#include "core/job.h"

namespace baton {

bool operator==(const Parallel& a, const Parallel& b) { return a.tasks == b.tasks; }
bool operator==(const SwitchCase& a, const SwitchCase& b) {
  return a.key == b.key && a.tasks == b.tasks;
}
bool operator==(const Switch& a, const Switch& b) {
  return a.value == b.value && a.cases == b.cases && a.default_tasks == b.default_tasks;
}
bool operator==(const Loop& a, const Loop& b) {
  return a.tasks == b.tasks && a.while_expr == b.while_expr && a.until_expr == b.until_expr &&
         a.max == b.max;
}

bool operator==(const OnFailure& a, const OnFailure& b) {
  return a.tasks == b.tasks && a.then == b.then;
}

bool operator==(const Each& a, const Each& b) {
  return a.var == b.var && a.list == b.list && a.task == b.task && a.concurrency == b.concurrency;
}

bool operator==(const SubJob& a, const SubJob& b) {
  return a.name == b.name && a.description == b.description && a.tasks == b.tasks &&
         a.inputs == b.inputs && a.secrets == b.secrets && a.output == b.output &&
         a.auto_delete == b.auto_delete && a.webhooks == b.webhooks && a.detached == b.detached &&
         a.mode == b.mode && a.on_failure == b.on_failure && a.finally == b.finally;
}

std::string_view ToString(FailReason reason) {
  switch (reason) {
    case FailReason::kNone:
      return "";
    case FailReason::kExit:
      return "exit";
    case FailReason::kTimeout:
      return "timeout";
    case FailReason::kOutOfMemory:
      return "oom";
    case FailReason::kLost:
      return "lost";
    case FailReason::kError:
      return "error";
  }
  return "";
}

std::optional<FailReason> ParseFailReason(std::string_view text) {
  for (FailReason r : {FailReason::kExit, FailReason::kTimeout, FailReason::kOutOfMemory,
                       FailReason::kLost, FailReason::kError}) {
    if (ToString(r) == text) return r;
  }
  return std::nullopt;
}

std::string_view ToString(MountType type) {
  switch (type) {
    case MountType::kVolume:
      return "volume";
    case MountType::kBind:
      return "bind";
    case MountType::kTmpfs:
      return "tmpfs";
  }
  return "volume";
}

std::optional<MountType> ParseMountType(std::string_view text) {
  if (text == "volume") return MountType::kVolume;
  if (text == "bind") return MountType::kBind;
  if (text == "tmpfs") return MountType::kTmpfs;
  return std::nullopt;
}

bool IsReservedMountTarget(std::string_view target) {
  while (target.size() > 1 && target.back() == '/') target.remove_suffix(1);
  for (std::string_view reserved : {"/tork", "/baton"}) {
    if (target == reserved || (target.starts_with(reserved) && target.size() > reserved.size() &&
                               target[reserved.size()] == '/')) {
      return true;
    }
  }
  return false;
}

}  // namespace baton
