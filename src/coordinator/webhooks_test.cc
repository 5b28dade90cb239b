#include "coordinator/webhooks.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/fake_clock.h"
#include "testing/wait_for.h"

namespace baton {
namespace {

using namespace std::chrono_literals;

// Answers every call with the next of `statuses` (the last one repeated), and remembers
// what it was sent.
class FakeSender final : public WebhookSender {
 public:
  struct Call {
    std::string url;
    std::map<std::string, std::string> headers;
    std::string body;
  };
  std::vector<WebhookResponse> answers = {{200, ""}};

  WebhookResponse Post(const std::string& url,
                       const std::vector<std::pair<std::string, std::string>>& headers,
                       const std::string& body, std::chrono::milliseconds,
                       const std::function<bool()>&) override {
    std::lock_guard lock(mu_);
    Call call{url, {}, body};
    for (const auto& [k, v] : headers) call.headers[k] = v;
    calls_.push_back(call);
    std::size_t i = std::min(calls_.size() - 1, answers.size() - 1);
    return answers[i];
  }
  std::vector<Call> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
};

class WebhookDelivererTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    ds_ = std::move(*ds);
    JobRecord job;
    job.id = "0123456789abcdef0123456789abcdef";
    job.created_at = clock_.Now();
    job.job.name = "j";
    ASSERT_TRUE(ds_->CreateJob(job).ok());
    job_id_ = job.id;
  }

  // Writes a PENDING delivery due now.
  std::string Enqueue(const std::string& url = "http://127.0.0.1:9/hook",
                      const std::string& secret = "") {
    WebhookDelivery d;
    d.id = NewId();
    d.job_id = job_id_;
    d.event = "job.StateChange";
    d.url = url;
    d.headers = {{"X-Custom", "yes"}};
    d.secret = secret;
    d.body = R"({"id":"x","state":"COMPLETED"})";
    d.created_at = clock_.Now();
    d.next_attempt_at = clock_.Now();
    EXPECT_TRUE(
        ds_->Transact([&](Transaction& tx) { return tx.CreateWebhookDeliveries({d}); }).ok());
    return d.id;
  }

  WebhookDelivery Stored(const std::string& id) {
    std::vector<WebhookDelivery> all;
    EXPECT_TRUE(ds_->Transact([&](Transaction& tx) -> Status {
                     auto rows = tx.JobWebhookDeliveries(job_id_);
                     if (!rows.ok()) return rows.status();
                     all = std::move(*rows);
                     return Status::Ok();
                   })
                    .ok());
    for (const WebhookDelivery& d : all) {
      if (d.id == id) return d;
    }
    ADD_FAILURE() << "no delivery " << id;
    return {};
  }

  WebhookDeliverer Deliverer(WebhookOptions options = {}) {
    return WebhookDeliverer(*ds_, sender_, clock_, std::move(options));
  }

  testing::FakeClock clock_;
  FakeSender sender_;
  std::unique_ptr<SqliteDatastore> ds_;
  std::string job_id_;
};

TEST_F(WebhookDelivererTest, DeliversOnceWithItsIdEventCustomHeadersAndSignature) {
  std::string id = Enqueue("http://127.0.0.1:9/hook", "k3y");
  WebhookDeliverer deliverer = Deliverer();
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  EXPECT_EQ(deliverer.DeliverDue(), 0);  // delivered: never again
  auto calls = sender_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].url, "http://127.0.0.1:9/hook");
  EXPECT_EQ(calls[0].body, R"({"id":"x","state":"COMPLETED"})");
  EXPECT_EQ(calls[0].headers["X-Baton-Delivery"], id);
  EXPECT_EQ(calls[0].headers["Idempotency-Key"], id);
  EXPECT_EQ(calls[0].headers["X-Baton-Event"], "job.StateChange");
  EXPECT_EQ(calls[0].headers["X-Baton-Attempt"], "1");
  EXPECT_EQ(calls[0].headers["X-Custom"], "yes");
  const std::int64_t t =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  EXPECT_EQ(calls[0].headers["X-Baton-Signature"], WebhookSignature("k3y", t, id, calls[0].body));
  EXPECT_EQ(calls[0].headers["X-Baton-Signature"],
            "t=" + std::to_string(t) +
                ",v1=" + HmacSha256Hex("k3y", std::to_string(t) + "." + id + "." + calls[0].body));
  WebhookDelivery d = Stored(id);
  EXPECT_EQ(d.state, DeliveryState::kDelivered);
  EXPECT_EQ(d.attempts, 1);
  ASSERT_EQ(d.history.size(), 1u);
  EXPECT_EQ(d.history[0].status_code, 200);
  EXPECT_TRUE(d.completed_at.has_value());
}

TEST_F(WebhookDelivererTest, WithoutAnyKeyTheCallIsNotSignedAndTheConfiguredKeyIsTheDefault) {
  Enqueue();
  Deliverer().DeliverDue();
  std::string id = Enqueue();
  Deliverer({.secret = "configured"}).DeliverDue();
  auto calls = sender_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_FALSE(calls[0].headers.contains("X-Baton-Signature"));
  const std::int64_t t =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  EXPECT_EQ(calls[1].headers["X-Baton-Signature"],
            WebhookSignature("configured", t, id, calls[1].body));
}

TEST_F(WebhookDelivererTest, RetriesNetworkErrors429And5xxWithDoublingBackoffThenFails) {
  sender_.answers = {{0, "Connection refused"}, {429, ""}, {503, ""}};
  std::string id = Enqueue();
  WebhookDeliverer deliverer = Deliverer({.max_attempts = 3, .backoff = 1s});
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  EXPECT_EQ(deliverer.DeliverDue(), 0);  // in its backoff
  clock_.Advance(999ms);
  EXPECT_EQ(deliverer.DeliverDue(), 0);
  clock_.Advance(1ms);
  EXPECT_EQ(deliverer.DeliverDue(), 1);  // second attempt after 1 s
  clock_.Advance(1999ms);
  EXPECT_EQ(deliverer.DeliverDue(), 0);
  clock_.Advance(1ms);
  EXPECT_EQ(deliverer.DeliverDue(), 1);  // third after 2 s more
  clock_.Advance(1h);
  EXPECT_EQ(deliverer.DeliverDue(), 0);  // given up
  auto calls = sender_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].headers["X-Baton-Attempt"], "3");
  EXPECT_EQ(calls[2].headers["X-Baton-Delivery"], calls[0].headers["X-Baton-Delivery"]);
  WebhookDelivery d = Stored(id);
  EXPECT_EQ(d.state, DeliveryState::kFailed);
  EXPECT_EQ(d.attempts, 3);
  ASSERT_EQ(d.history.size(), 3u);
  EXPECT_EQ(d.history[0].status_code, 0);
  EXPECT_EQ(d.history[0].error, "Connection refused");
  EXPECT_EQ(d.history[1].status_code, 429);
  EXPECT_EQ(d.history[2].status_code, 503);
  EXPECT_EQ(d.error, "gave up after 3 attempts: the receiver answered 503");
}

TEST_F(WebhookDelivererTest, AnyOther4xxFailsAtOnce) {
  sender_.answers = {{404, ""}};
  std::string id = Enqueue();
  WebhookDeliverer deliverer = Deliverer();
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  clock_.Advance(1h);
  EXPECT_EQ(deliverer.DeliverDue(), 0);
  WebhookDelivery d = Stored(id);
  EXPECT_EQ(d.state, DeliveryState::kFailed);
  EXPECT_EQ(d.error, "the receiver answered 404");
}

TEST_F(WebhookDelivererTest, AnAbandonedAttemptIsSentAgainOnceItsClaimEnds) {
  sender_.answers = {{0, "stopped"}, {200, ""}};
  std::string id = Enqueue();
  WebhookDeliverer deliverer = Deliverer({.claim = 30s});
  EXPECT_EQ(deliverer.DeliverDue(), 1);  // abandoned mid-call, as by a stop or a crash
  EXPECT_EQ(Stored(id).state, DeliveryState::kPending);
  clock_.Advance(29s);
  EXPECT_EQ(deliverer.DeliverDue(), 0);  // still claimed
  clock_.Advance(1s);
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  EXPECT_EQ(Stored(id).state, DeliveryState::kDelivered);
  auto calls = sender_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].headers["X-Baton-Delivery"], id);
}

TEST_F(WebhookDelivererTest, ASoleCoordinatorTakesBackItsPredecessorsClaimsAtStart) {
  sender_.answers = {{0, "stopped"}, {200, ""}};
  std::string id = Enqueue();
  EXPECT_EQ(Deliverer({.claim = 1h}).DeliverDue(), 1);  // claimed for an hour, abandoned
  WebhookDeliverer next = Deliverer({.concurrency = 1, .release_claims_at_start = true});
  ASSERT_TRUE(next.Start().ok());
  EXPECT_TRUE(testing::WaitFor([&] { return Stored(id).state == DeliveryState::kDelivered; }, 5s));
  next.Stop();
}

TEST_F(WebhookDelivererTest, TakingBackClaimsAtStartReachesPastAHundredDueDeliveries) {
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(Enqueue());
  // Claimed for an hour by a predecessor, behind the hundred due now.
  sender_.answers = {{0, "stopped"}, {200, ""}};
  std::string claimed = Enqueue();
  WebhookDelivery held = Stored(claimed);
  held.next_attempt_at = clock_.Now() + 1h;
  ASSERT_TRUE(ds_->Transact([&](Transaction& tx) { return tx.UpdateWebhookDelivery(held); }).ok());
  sender_.answers = {{200, ""}};
  WebhookDeliverer next = Deliverer({.concurrency = 1, .release_claims_at_start = true});
  ASSERT_TRUE(next.Start().ok());
  EXPECT_TRUE(
      testing::WaitFor([&] { return Stored(claimed).state == DeliveryState::kDelivered; }, 10s));
  next.Stop();
}

TEST_F(WebhookDelivererTest, AHostNotAllowedIsNeverCalled) {
  std::string id = Enqueue("http://example.com/hook");
  WebhookDeliverer deliverer = Deliverer({.allowed_hosts = {"127.0.0.1"}});
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  EXPECT_TRUE(sender_.calls().empty());
  WebhookDelivery d = Stored(id);
  EXPECT_EQ(d.state, DeliveryState::kFailed);
  EXPECT_EQ(d.error, "refused by policy: the host example.com is not in webhooks.allowed_hosts");
}

TEST_F(WebhookDelivererTest, EachAttemptIsSignedWithItsOwnTime) {
  // A replayed call carries its first time: past the receiver's window, it is refused.
  std::string id = Enqueue("http://127.0.0.1:9/hook", "k");
  sender_.answers = {{500, ""}, {200, ""}};
  WebhookDeliverer deliverer = Deliverer({.backoff = 10s});
  const TimePoint first = clock_.Now();
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  clock_.Advance(10s);
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  auto calls = sender_.calls();
  ASSERT_EQ(calls.size(), 2u);
  auto seconds = [](TimePoint at) {
    return std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
  };
  EXPECT_EQ(calls[0].headers["X-Baton-Signature"],
            WebhookSignature("k", seconds(first), id, calls[0].body));
  EXPECT_EQ(calls[1].headers["X-Baton-Signature"],
            WebhookSignature("k", seconds(first + 10s), id, calls[1].body));
}

TEST_F(WebhookDelivererTest, AnAddressThePolicyRefusesFailsAtOnceSayingSo) {
  // Retrying gains nothing (nothing was sent) and would only time a port.
  std::string id = Enqueue("http://127.0.0.1:9/hook");
  const std::string refused = "refused by policy: the address is loopback (allowed only by ...)";
  sender_.answers = {{0, refused, true}};
  WebhookDeliverer deliverer = Deliverer();
  EXPECT_EQ(deliverer.DeliverDue(), 1);
  clock_.Advance(std::chrono::hours(1));
  EXPECT_EQ(deliverer.DeliverDue(), 0);
  EXPECT_EQ(sender_.calls().size(), 1u);
  WebhookDelivery d = Stored(id);
  EXPECT_EQ(d.state, DeliveryState::kFailed);
  EXPECT_EQ(d.attempts, 1);
  EXPECT_EQ(d.error, refused);
  ASSERT_EQ(d.history.size(), 1u);
  EXPECT_EQ(d.history[0].error, refused);
  EXPECT_EQ(d.history[0].status_code, 0);
}

}  // namespace
}  // namespace baton
