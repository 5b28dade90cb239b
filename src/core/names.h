// Wire strings of the domain, defined once: job and task states, engine queue names.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace baton {

// kPaused (beyond Tork): its work held (core/states.h), last so Tork's states keep their order.
enum class JobState { kPending, kScheduled, kRunning, kCompleted, kFailed, kCancelled, kPaused };

enum class TaskState {
  kCreated,
  kPending,
  kScheduled,
  kRunning,
  kCompleted,
  kFailed,
  kCancelled,
  kSkipped,
};

enum class NodeStatus { kUp, kDown, kOffline };

// A webhook delivery: waiting for (another) attempt, delivered (a 2xx answer), or given up.
enum class DeliveryState { kPending, kDelivered, kFailed };

// The events a webhook is called on (Tork's names); an empty `event` is job.StateChange.
inline constexpr std::string_view kEventJobStateChange = "job.StateChange";
inline constexpr std::string_view kEventJobProgress = "job.Progress";
inline constexpr std::string_view kEventTaskStateChange = "task.StateChange";
inline constexpr std::string_view kEventTaskProgress = "task.Progress";
std::span<const std::string_view> WebhookEvents();

std::string_view ToString(JobState state);
std::string_view ToString(NodeStatus status);
std::optional<NodeStatus> ParseNodeStatus(std::string_view text);
std::string_view ToString(TaskState state);
std::optional<JobState> ParseJobState(std::string_view text);
std::optional<TaskState> ParseTaskState(std::string_view text);
std::string_view ToString(DeliveryState state);
std::optional<DeliveryState> ParseDeliveryState(std::string_view text);

// The broker's own queues; user tasks may not be routed to them.
inline constexpr std::string_view kQueuePending = "x-pending";
inline constexpr std::string_view kQueueStarted = "x-started";
inline constexpr std::string_view kQueueCompleted = "x-completed";
inline constexpr std::string_view kQueueFailed = "x-failed";
inline constexpr std::string_view kQueueHeartbeat = "x-heartbeat";
inline constexpr std::string_view kQueueLogs = "x-logs";
inline constexpr std::string_view kQueueProgress = "x-progress";
inline constexpr std::string_view kQueueJobs = "x-jobs";
inline constexpr std::string_view kQueueRedeliveries = "x-redeliveries";
// The queue a task goes to when it names none.
inline constexpr std::string_view kQueueDefault = "default";

// The broadcast topic on which coordinators share the changes of GET /events (on
// RabbitMQ, the fanout exchange "baton.broadcast.events").
inline constexpr std::string_view kTopicEvents = "events";

// Every engine queue, for validation and for declaring them on a broker.
std::span<const std::string_view> EngineQueues();

// Engine queues are prefixed "x-" (reserved), and a few are also known by the bare
// names Tork uses ("jobs", "logs", ...). True when `name` must not carry user tasks.
bool IsReservedQueueName(std::string_view name);

// A name of letters, digits and _, not starting with a digit: an each's `var`, a signal's
// name (a wait's `signal`, POST /jobs/{id}/signals/{name}).
bool IsIdentifier(std::string_view s);

}  // namespace baton
