#include "coordinator/event_relay.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "base/log.h"
#include "core/names.h"

namespace baton {
namespace {

std::string_view KindName(Change::Kind kind) {
  switch (kind) {
    case Change::Kind::kJob:
      return "job";
    case Change::Kind::kTask:
      return "task";
    case Change::Kind::kLog:
      return "log";
  }
  return "job";
}

std::optional<Change::Kind> ParseKind(std::string_view name) {
  if (name == "job") return Change::Kind::kJob;
  if (name == "task") return Change::Kind::kTask;
  if (name == "log") return Change::Kind::kLog;
  return std::nullopt;
}

}  // namespace

std::string EncodeRelayMessage(const RelayMessage& message) {
  nlohmann::json out = {{"from", message.from}};
  if (message.want) out["want"] = true;
  if (!message.changes.empty()) {
    nlohmann::json changes = nlohmann::json::array();
    for (const Change& c : message.changes) {
      changes.push_back({{"kind", KindName(c.kind)},
                         {"jobId", c.job_id},
                         {"taskId", c.task_id},
                         {"parentId", c.parent_id},
                         {"state", c.state},
                         {"nodeId", c.node_id},
                         {"contents", c.contents},
                         {"progress", c.progress},
                         {"position", c.position},
                         {"taskCount", c.task_count},
                         {"number", c.number}});
    }
    out["changes"] = std::move(changes);
  }
  // Log contents that are not UTF-8 are replaced, as FormatEvent does.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<RelayMessage> DecodeRelayMessage(std::string_view body) {
  nlohmann::json in = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return InvalidArgument("an events relay message is not a JSON object");
  try {
    RelayMessage message;
    message.from = in.at("from").get<std::string>();
    if (message.from.empty()) return InvalidArgument("an events relay message has no sender");
    message.want = in.value("want", false);
    if (auto it = in.find("changes"); it != in.end()) {
      for (const nlohmann::json& c : *it) {
        auto kind = ParseKind(c.at("kind").get<std::string>());
        if (!kind) return InvalidArgument("an events relay message has a change of unknown kind");
        message.changes.push_back({.kind = *kind,
                                   .job_id = c.at("jobId").get<std::string>(),
                                   .task_id = c.value("taskId", ""),
                                   .parent_id = c.value("parentId", ""),
                                   .state = c.value("state", ""),
                                   .node_id = c.value("nodeId", ""),
                                   .contents = c.value("contents", ""),
                                   .progress = c.value("progress", 0.0),
                                   .position = c.value("position", 0),
                                   .task_count = c.value("taskCount", 0),
                                   .number = c.value("number", 0)});
      }
    }
    if (!message.want && message.changes.empty()) {
      return InvalidArgument("an events relay message has neither a want nor changes");
    }
    return message;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("a malformed events relay message: ") + e.what());
  }
}

EventRelay::EventRelay(Broker& broker, Clock& clock, Timers& timers, EventHub& hub,
                       EventRelayOptions options)
    : broker_(broker), clock_(clock), timers_(timers), hub_(hub), options_(std::move(options)) {}

EventRelay::~EventRelay() { Stop(); }

Status EventRelay::Start() {
  if (options_.coordinator_id.empty()) {
    return InvalidArgument("sharing events between coordinators needs a coordinator id");
  }
  if (options_.want_interval < std::chrono::milliseconds(1)) {
    return InvalidArgument("the events relay's want_interval must be at least 1 ms");
  }
  {
    MutexLock lock(mu_);
    if (started_) return Status::Ok();
  }
  auto sub =
      broker_.SubscribeBroadcast(kTopicEvents, [this](std::string body) { OnMessage(body); });
  if (!sub.ok()) return sub.status();
  subscription_ = std::move(sub).value();
  hub_.SetHooks({.forward = [this](const std::vector<Change>& changes) { Forward(changes); },
                 .stream_opened = [this] { SendWant(); }});
  {
    MutexLock lock(mu_);
    started_ = true;
    ArmTick();
  }
  // Streams opened before the hooks were set told nobody.
  if (hub_.LocalStreams() > 0) SendWant();
  return Status::Ok();
}

void EventRelay::Stop() {
  {
    MutexLock lock(mu_);
    if (!started_) return;
    started_ = false;
    if (timer_) timers_.Cancel(*timer_);
    timer_.reset();
    idle_.wait(lock, [&] {
      mu_.AssertHeld();
      return !tick_running_;
    });
  }
  hub_.SetHooks({});
  if (subscription_) subscription_->Close();
  subscription_.reset();
  MutexLock lock(mu_);
  last_want_heard_.reset();
  hub_.SetRemoteWanted(false);
}

void EventRelay::ArmTick() {
  timer_ = timers_.Schedule(clock_.Now() + options_.want_interval, [this] {
    {
      MutexLock lock(mu_);
      if (!started_) return;
      timer_.reset();
      tick_running_ = true;
    }
    Tick();
    {
      MutexLock lock(mu_);
      tick_running_ = false;
      if (started_) ArmTick();
    }
    idle_.notify_all();
  });
}

void EventRelay::Tick() {
  if (hub_.LocalStreams() > 0) SendWant();
  MutexLock lock(mu_);
  // Under mu_, so that a want heard meanwhile cannot be undone by this expiry.
  if (last_want_heard_ &&
      clock_.Now() - *last_want_heard_ > kWantLifetimes * options_.want_interval) {
    last_want_heard_.reset();
    hub_.SetRemoteWanted(false);
  }
}

void EventRelay::OnMessage(const std::string& body) {
  auto message = DecodeRelayMessage(body);
  if (!message.ok()) {
    log::Warn("dropping a bad events relay message", {{"error", message.status().message()}});
    return;
  }
  if (message->from == options_.coordinator_id) return;  // our own, back from the broker
  if (message->want) {
    Count("received", "want");
    MutexLock lock(mu_);
    last_want_heard_ = clock_.Now();
    hub_.SetRemoteWanted(true);
  }
  if (!message->changes.empty()) {
    Count("received", "changes");
    hub_.Deliver(std::move(message->changes));
  }
}

void EventRelay::SendWant() {
  Status s = broker_.Broadcast(kTopicEvents,
                               EncodeRelayMessage({.from = options_.coordinator_id, .want = true}));
  if (!s.ok()) {
    log::Warn("asking the other coordinators for their events failed", {{"error", s.message()}});
    return;
  }
  Count("sent", "want");
}

void EventRelay::Forward(const std::vector<Change>& changes) {
  Status s = broker_.Broadcast(
      kTopicEvents, EncodeRelayMessage({.from = options_.coordinator_id, .changes = changes}));
  if (!s.ok()) {
    log::Warn("sharing events with the other coordinators failed", {{"error", s.message()}});
    return;
  }
  Count("sent", "changes");
}

void EventRelay::Count(std::string_view direction, std::string_view message) {
  if (options_.metrics != nullptr) options_.metrics->EventsRelayed(direction, message);
}

}  // namespace baton
