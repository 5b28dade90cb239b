// The webhook deliverer: sends what the outbox holds (Transaction::DueWebhookDeliveries),
// at least once, and records every attempt.
//
// A delivery is claimed before it is sent (its next_attempt_at moved to now + `claim`, in
// one transaction that locks it), so coordinators sending at once take different ones,
// and one whose sender died (kill -9 mid-call) is due again once its claim ends; a
// coordinator that is the only one (release_claims_at_start) takes its predecessor's
// claims back at start instead of waiting them out. Each attempt carries the delivery's
// id (X-Baton-Delivery and Idempotency-Key, the same on every retry: a receiver dedupes
// by it), its event (X-Baton-Event), its attempt number (X-Baton-Attempt) and, when it
// has a key (the webhook's `secret`, else webhooks.secret, which the engine makes at first
// start when none is configured), the signature of the attempt's time, the delivery's id
// and the body (X-Baton-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>, sender.h). A 2xx answer
// delivers it; a network error, a 429 or a 5xx is retried after a backoff that doubles from
// `backoff` up to `max_backoff`, at most `max_attempts` attempts in all, and then the delivery
// FAILS with its last error; any other answer fails it at once. A host not in `allowed_hosts` (when
// given) is never called, nor an address the sender's AddressPolicy refuses
// (`allow_private`, `allowed_networks`): the delivery fails at once, "refused by policy:"
// and which rule, the same whatever listens there.
//
// Thread-safety: thread-safe. `concurrency` threads send; Wake may be called from any
// thread (the scheduler calls it after a commit that wrote deliveries).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "datastore/datastore.h"
#include "metrics/metrics.h"
#include "webhook/sender.h"

namespace baton {

struct WebhookOptions {
  int max_attempts = 8;
  std::chrono::milliseconds backoff = std::chrono::seconds(1);
  std::chrono::milliseconds max_backoff = std::chrono::minutes(5);
  std::chrono::milliseconds timeout = std::chrono::seconds(10);  // one attempt
  // How long a claimed delivery stays with the coordinator sending it: longer than an
  // attempt, or another coordinator would send it again while it is under way.
  std::chrono::milliseconds claim = std::chrono::seconds(30);
  int concurrency = 4;                     // deliveries under way at once
  std::string secret;                      // the signing key of webhooks without their own `secret`
  std::vector<std::string> allowed_hosts;  // lowercase hosts; empty: any
  // Which addresses may be called (webhook/address_policy.h), given to the sender the
  // engine makes: every one with `allow_private`, else public ones and those in
  // `allowed_networks`.
  bool allow_private = false;
  std::vector<IpNetwork> allowed_networks;
  // How often idle senders look for deliveries that other coordinators wrote or whose
  // backoff ended (a commit here wakes them at once).
  std::chrono::milliseconds poll = std::chrono::seconds(1);
  bool release_claims_at_start = false;
  // Counts each attempt's outcome and each delivery's end, once recorded. Null: not counted.
  Metrics* metrics = nullptr;
};

class WebhookDeliverer {
 public:
  // `redact` gives the values to hide in a delivery's body (the job's secrets).
  using Redact = std::function<std::string(const WebhookDelivery&)>;
  WebhookDeliverer(Datastore& datastore, WebhookSender& sender, Clock& clock,
                   WebhookOptions options, Redact redact = nullptr);
  ~WebhookDeliverer();
  WebhookDeliverer(const WebhookDeliverer&) = delete;
  WebhookDeliverer& operator=(const WebhookDeliverer&) = delete;

  // Starts the senders (and, with release_claims_at_start, makes every PENDING delivery
  // due now first).
  Status Start();
  // Stops the senders; an attempt under way is abandoned (its claim runs out, and it is
  // sent again).
  void Stop();
  void Wake();

  // Claims and sends the deliveries due now, one after another, until none is: what a
  // sender thread does, for tests on a fake clock. Returns how many were attempted.
  int DeliverDue();

  // The wait before attempt `attempt` + 1 after `attempt` failed (1-based).
  std::chrono::milliseconds Backoff(int attempt) const;

 private:
  void Loop(std::stop_token stop);
  // Claims one due delivery; nullopt when none is due.
  Result<std::optional<WebhookDelivery>> Claim();
  // Sends it and records the attempt.
  void Deliver(WebhookDelivery delivery, const std::function<bool()>& stopped);
  // The headers of attempt `number` of `d` with `body` (signed when a secret is set).
  std::vector<std::pair<std::string, std::string>> HeadersFor(const WebhookDelivery& d, int number,
                                                              const std::string& body) const;
  // Stores the attempt made (the next one scheduled when `retry` and attempts are left).
  void Record(WebhookDelivery d, WebhookAttempt attempt, bool retry);

  Datastore& datastore_;
  WebhookSender& sender_;
  Clock& clock_;
  const WebhookOptions options_;
  Redact redact_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::uint64_t wakes_ = 0;  // guarded by mu_
  std::vector<std::jthread> threads_;
};

}  // namespace baton
