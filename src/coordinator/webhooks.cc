#include "coordinator/webhooks.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/log.h"

namespace baton {

WebhookDeliverer::WebhookDeliverer(Datastore& datastore, WebhookSender& sender, Clock& clock,
                                   WebhookOptions options, Redact redact)
    : datastore_(datastore),
      sender_(sender),
      clock_(clock),
      options_(std::move(options)),
      redact_(std::move(redact)) {}

WebhookDeliverer::~WebhookDeliverer() { Stop(); }

Status WebhookDeliverer::Start() {
  if (options_.release_claims_at_start) {
    // A predecessor killed mid-call left its claims: this is the only coordinator, so no
    // one else is sending them.
    const TimePoint now = clock_.Now();
    BATON_RETURN_IF_ERROR(datastore_.Transact(
        [&](Transaction& tx) { return tx.ReleaseWebhookDeliveries(now).status(); }));
  }
  for (int i = 0; i < std::max(1, options_.concurrency); ++i) {
    threads_.emplace_back([this](std::stop_token stop) { Loop(stop); });
  }
  return Status::Ok();
}

void WebhookDeliverer::Stop() {
  for (std::jthread& t : threads_) t.request_stop();
  cv_.notify_all();
  threads_.clear();  // joins
}

void WebhookDeliverer::Wake() {
  {
    std::lock_guard lock(mu_);
    ++wakes_;
  }
  cv_.notify_all();
}

std::chrono::milliseconds WebhookDeliverer::Backoff(int attempt) const {
  auto wait = options_.backoff;
  for (int i = 1; i < attempt && wait < options_.max_backoff; ++i) wait *= 2;
  return std::min(wait, options_.max_backoff);
}

void WebhookDeliverer::Loop(std::stop_token stop) {
  auto stopped = [&stop] { return stop.stop_requested(); };
  while (!stop.stop_requested()) {
    std::uint64_t seen;
    {
      std::lock_guard lock(mu_);
      seen = wakes_;
    }
    auto claimed = Claim();
    if (claimed.ok() && *claimed) {
      Deliver(std::move(**claimed), stopped);
      continue;
    }
    if (!claimed.ok()) {
      log::Warn("could not claim webhook deliveries", {{"error", claimed.status().message()}});
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, stop, options_.poll, [&] { return wakes_ != seen; });
  }
}

int WebhookDeliverer::DeliverDue() {
  int n = 0;
  for (;;) {
    auto claimed = Claim();
    if (!claimed.ok() || !*claimed) return n;
    Deliver(std::move(**claimed), [] { return false; });
    ++n;
  }
}

Result<std::optional<WebhookDelivery>> WebhookDeliverer::Claim() {
  std::optional<WebhookDelivery> out;
  const TimePoint now = clock_.Now();
  Status s = datastore_.Transact([&](Transaction& tx) -> Status {
    out.reset();
    auto due = tx.DueWebhookDeliveries(now, 1);
    if (!due.ok()) return due.status();
    if (due->empty()) return Status::Ok();
    WebhookDelivery d = std::move(due->front());
    d.next_attempt_at = now + options_.claim;
    BATON_RETURN_IF_ERROR(tx.UpdateWebhookDelivery(d));
    out = std::move(d);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

void WebhookDeliverer::Deliver(WebhookDelivery d, const std::function<bool()>& stopped) {
  WebhookAttempt attempt;
  attempt.at = clock_.Now();
  const int number = d.attempts + 1;
  bool retry = false;
  std::string host = UrlHost(d.url);
  bool allowed = options_.allowed_hosts.empty() ||
                 std::find(options_.allowed_hosts.begin(), options_.allowed_hosts.end(), host) !=
                     options_.allowed_hosts.end();
  if (!allowed) {
    attempt.error =
        fmt::format("refused by policy: the host {} is not in webhooks.allowed_hosts", host);
  } else {
    std::string body = redact_ ? redact_(d) : d.body;
    auto headers = HeadersFor(d, number, body);
    auto started = std::chrono::steady_clock::now();
    WebhookResponse r = sender_.Post(d.url, headers, body, options_.timeout, stopped);
    attempt.duration_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - started)
                                               .count());
    if (r.status == 0 && r.error == "stopped") return;  // the claim runs out; sent again
    attempt.status_code = r.status;
    if (r.status >= 200 && r.status < 300) {
      d.state = DeliveryState::kDelivered;
    } else if (r.refused) {
      attempt.error = r.error;  // not retried: nothing was sent
    } else if (r.status == 0) {
      attempt.error = r.error;
      retry = true;
    } else {
      attempt.error = fmt::format("the receiver answered {}", r.status);
      retry = r.status == 429 || r.status >= 500;
    }
  }
  Record(std::move(d), std::move(attempt), retry);
}

std::vector<std::pair<std::string, std::string>> WebhookDeliverer::HeadersFor(
    const WebhookDelivery& d, int number, const std::string& body) const {
  std::vector<std::pair<std::string, std::string>> headers;
  headers.reserve(d.headers.size() + 6);
  for (const auto& [name, value] : d.headers) headers.emplace_back(name, value);
  headers.emplace_back("Content-Type", "application/json; charset=UTF-8");
  headers.emplace_back("X-Baton-Delivery", d.id);
  headers.emplace_back("Idempotency-Key", d.id);
  headers.emplace_back("X-Baton-Event", d.event);
  headers.emplace_back("X-Baton-Attempt", std::to_string(number));
  const std::string& key = d.secret.empty() ? options_.secret : d.secret;
  if (!key.empty()) {
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
    headers.emplace_back("X-Baton-Signature", WebhookSignature(key, now, d.id, body));
  }
  return headers;
}

void WebhookDeliverer::Record(WebhookDelivery d, WebhookAttempt attempt, bool retry) {
  const TimePoint now = clock_.Now();
  const int number = d.attempts + 1;
  d.attempts = number;
  d.history.push_back(attempt);
  if (d.state != DeliveryState::kDelivered) {
    if (retry && number < options_.max_attempts) {
      d.next_attempt_at = now + Backoff(number);
    } else {
      d.state = DeliveryState::kFailed;
      d.error = retry ? fmt::format("gave up after {} attempts: {}", number, attempt.error)
                      : attempt.error;
    }
  }
  if (d.state != DeliveryState::kPending) d.completed_at = now;
  Status s =
      datastore_.Transact([&](Transaction& tx) -> Status { return tx.UpdateWebhookDelivery(d); });
  if (!s.ok()) {
    // Its claim runs out and it is sent again: at least once.
    log::Warn("could not record a webhook attempt",
              {{"job_id", d.job_id}, {"delivery", d.id}, {"error", s.message()}});
  } else if (d.state == DeliveryState::kFailed) {
    log::Warn("webhook delivery failed",
              {{"job_id", d.job_id}, {"delivery", d.id}, {"error", d.error}});
  }
  if (s.ok() && options_.metrics != nullptr) {
    options_.metrics->WebhookAttempted(d.state == DeliveryState::kDelivered ? "delivered"
                                       : d.state == DeliveryState::kPending ? "retry"
                                                                            : "failed");
    if (d.state != DeliveryState::kPending) options_.metrics->WebhookEnded(ToString(d.state));
  }
}

}  // namespace baton
