#include "core/names.h"

#include <array>

namespace baton {
namespace {

constexpr std::array<std::string_view, 7> kJobStates = {
    "PENDING", "SCHEDULED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "PAUSED"};
constexpr std::array<std::string_view, 8> kTaskStates = {
    "CREATED", "PENDING", "SCHEDULED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "SKIPPED"};

constexpr std::array<std::string_view, 3> kNodeStatuses = {"UP", "DOWN", "OFFLINE"};
constexpr std::array<std::string_view, 3> kDeliveryStates = {"PENDING", "DELIVERED", "FAILED"};
constexpr std::array<std::string_view, 4> kWebhookEvents = {
    kEventJobStateChange, kEventJobProgress, kEventTaskStateChange, kEventTaskProgress};

constexpr std::array<std::string_view, 9> kEngineQueues = {
    kQueuePending, kQueueStarted,  kQueueCompleted, kQueueFailed,      kQueueHeartbeat,
    kQueueLogs,    kQueueProgress, kQueueJobs,      kQueueRedeliveries};

// The names Tork gives its engine queues, refused too so a Tork user's mistake is caught.
constexpr std::array<std::string_view, 9> kTorkEngineQueues = {
    "pending", "started", "completed", "error",       "heartbeat",
    "jobs",    "logs",    "progress",  "redeliveries"};

}  // namespace

std::string_view ToString(JobState state) { return kJobStates[static_cast<int>(state)]; }
std::string_view ToString(TaskState state) { return kTaskStates[static_cast<int>(state)]; }

std::string_view ToString(DeliveryState state) { return kDeliveryStates[static_cast<int>(state)]; }

std::optional<DeliveryState> ParseDeliveryState(std::string_view text) {
  for (std::size_t i = 0; i < kDeliveryStates.size(); ++i) {
    if (kDeliveryStates[i] == text) return static_cast<DeliveryState>(i);
  }
  return std::nullopt;
}

std::span<const std::string_view> WebhookEvents() { return kWebhookEvents; }

std::string_view ToString(NodeStatus status) { return kNodeStatuses[static_cast<int>(status)]; }

std::optional<NodeStatus> ParseNodeStatus(std::string_view text) {
  for (std::size_t i = 0; i < kNodeStatuses.size(); ++i) {
    if (kNodeStatuses[i] == text) return static_cast<NodeStatus>(i);
  }
  return std::nullopt;
}

std::optional<JobState> ParseJobState(std::string_view text) {
  for (std::size_t i = 0; i < kJobStates.size(); ++i) {
    if (kJobStates[i] == text) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

std::optional<TaskState> ParseTaskState(std::string_view text) {
  for (std::size_t i = 0; i < kTaskStates.size(); ++i) {
    if (kTaskStates[i] == text) return static_cast<TaskState>(i);
  }
  return std::nullopt;
}

std::span<const std::string_view> EngineQueues() { return kEngineQueues; }

bool IsReservedQueueName(std::string_view name) {
  if (name.starts_with("x-")) return true;
  for (auto q : kTorkEngineQueues) {
    if (q == name) return true;
  }
  return false;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace baton
