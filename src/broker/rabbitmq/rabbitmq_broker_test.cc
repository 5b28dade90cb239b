#include "broker/rabbitmq/rabbitmq_broker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/url.h"
#include "conformance/broker_conformance.h"
#include "http/client.h"
#include "testing/test_certificates.h"
#include "testing/wait_for.h"

namespace baton::testing {
namespace {

constexpr std::string_view kNotConfigured =
    "RabbitMQ not configured: set BATON_TEST_RABBITMQ_URL (make test starts one)";

// Test queues vanish ten minutes after their last use.
RabbitMqOptions TestOptions(const char* url) {
  // Assigned, not designated-initialised: g++ 12 warns about the fields left out.
  RabbitMqOptions options;
  options.url = url;
  options.queue_expires = std::chrono::minutes(10);
  return options;
}

// Stands in for the broker when RabbitMQ is not configured, so the fixture's SetUp
// completes and the skip recorded by the factory takes effect.
class UnconfiguredBroker : public Broker {
 public:
  Status Publish(std::string_view, std::string, int) override { return Unavailable("skipped"); }
  Result<std::unique_ptr<Subscription>> Subscribe(std::string_view, int, DeliveryHandler) override {
    return Unavailable("skipped");
  }
  Result<std::vector<QueueInfo>> Queues() override { return Unavailable("skipped"); }
  Result<QueueInfo> Queue(std::string_view) override { return Unavailable("skipped"); }
  Status DeleteQueue(std::string_view) override { return Unavailable("skipped"); }
  Status Health() override { return Unavailable("skipped"); }
  Status Broadcast(std::string_view, std::string) override { return Unavailable("skipped"); }
  Result<std::unique_ptr<Subscription>> SubscribeBroadcast(std::string_view,
                                                           BroadcastHandler) override {
    return Unavailable("skipped");
  }
};

void SkipUnconfigured() { GTEST_SKIP() << kNotConfigured; }

// Connects to BATON_TEST_RABBITMQ_URL; a failure to connect fails the test.
std::unique_ptr<Broker> MakeRabbitMqBroker() {
  const char* url = std::getenv("BATON_TEST_RABBITMQ_URL");
  if (url == nullptr || *url == '\0') {
    SkipUnconfigured();
    return std::make_unique<UnconfiguredBroker>();
  }
  auto broker = RabbitMqBroker::Connect(TestOptions(url));
  if (!broker.ok()) {
    ADD_FAILURE() << "cannot connect to RabbitMQ at " << url << ": " << broker.status().ToString();
    return nullptr;
  }
  return std::move(broker).value();
}

// The TLS listener of the test RabbitMQ (rabbitmq.sh): amqps://…@localhost, its CA and a
// client certificate (the listener requires one) from BATON_TEST_TLS_DIR; nullopt when
// not configured.
std::optional<RabbitMqOptions> TlsOptions() {
  const char* url = std::getenv("BATON_TEST_RABBITMQ_TLS_URL");
  const char* dir = std::getenv("BATON_TEST_TLS_DIR");
  if (url == nullptr || *url == '\0' || dir == nullptr || *dir == '\0') return std::nullopt;
  RabbitMqOptions options = TestOptions(url);
  options.tls_ca = std::string(dir) + "/ca.pem";
  options.tls_cert = std::string(dir) + "/client.pem";
  options.tls_key = std::string(dir) + "/client.key";
  return options;
}

// The same broker over TLS: every conformance test runs over amqps:// too.
std::unique_ptr<Broker> MakeRabbitMqTlsBroker() {
  std::optional<RabbitMqOptions> options = TlsOptions();
  if (!options) {
    SkipUnconfigured();
    return std::make_unique<UnconfiguredBroker>();
  }
  auto broker = RabbitMqBroker::Connect(*options);
  if (!broker.ok()) {
    ADD_FAILURE() << "cannot connect to RabbitMQ over TLS: " << broker.status().ToString();
    return nullptr;
  }
  return std::move(broker).value();
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(RabbitMq, BrokerConformanceTest,
                         ::testing::Values(BrokerFactory{"RabbitMq", &MakeRabbitMqBroker},
                                           BrokerFactory{"RabbitMqTls", &MakeRabbitMqTlsBroker}),
                         BrokerFactoryName);

}  // namespace baton::testing

// What the conformance suite cannot ask of every broker: durability across connections.
namespace baton {
namespace {

using testing::WaitFor;
using testing::broker_conformance::Inbox;
using testing::broker_conformance::RandomNonce;

class RabbitMqBrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("BATON_TEST_RABBITMQ_URL");
    if (url == nullptr || *url == '\0') GTEST_SKIP() << testing::kNotConfigured;
    url_ = url;
  }

  std::unique_ptr<RabbitMqBroker> Connect() {
    auto broker = RabbitMqBroker::Connect(testing::TestOptions(url_.c_str()));
    EXPECT_TRUE(broker.ok()) << broker.status().ToString();
    if (!broker.ok()) return nullptr;
    return std::move(broker).value();
  }

  std::string QueueName() const {
    return std::string("rabbitmq_test.") +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "." + RandomNonce();
  }

  std::string url_;
};

TEST_F(RabbitMqBrokerTest, MessagesSurviveTheBrokerObject) {
  const std::string q = QueueName();
  {
    auto publisher = Connect();
    ASSERT_NE(publisher, nullptr);
    ASSERT_TRUE(publisher->Publish(q, "low", 1).ok());
    ASSERT_TRUE(publisher->Publish(q, "high", 8).ok());
  }
  auto consumer = Connect();
  ASSERT_NE(consumer, nullptr);
  auto info = consumer->Queue(q);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 2);
  Inbox inbox;
  auto sub = consumer->Subscribe(q, 5, inbox.Handler());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(inbox.WaitForSize(2));
  EXPECT_EQ(inbox.bodies(), (std::vector<std::string>{"high", "low"}));
}

TEST_F(RabbitMqBrokerTest, UnackedDeliveriesGoBackWhenTheBrokerObjectIsDestroyed) {
  const std::string q = QueueName();
  auto first = Connect();
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Publish(q, "held").ok());
  Inbox held(Inbox::Mode::kHold);
  auto sub = first->Subscribe(q, 1, held.Handler());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(held.WaitForSize(1));
  first.reset();  // closes the subscription's connection
  for (auto& delivery : held.TakeHeld()) {
    EXPECT_EQ(delivery->Ack().code(), StatusCode::kFailedPrecondition);
  }

  auto second = Connect();
  ASSERT_NE(second, nullptr);
  Inbox inbox;
  auto sub2 = second->Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(sub2.ok()) << sub2.status().ToString();
  ASSERT_TRUE(inbox.WaitForSize(1));
  EXPECT_EQ(inbox.seen()[0].body, "held");
  EXPECT_TRUE(inbox.seen()[0].redelivered);
}

// Queue statistics through the management API: deliveries held by another broker object
// (another process, as far as RabbitMQ can tell) count as unacked, and every queue of the
// vhost is listed. The statistics are sampled (every 500 ms in the test service).
TEST_F(RabbitMqBrokerTest, ManagementApiCountsUnackedDeliveriesOfOtherConnections) {
  const char* management = std::getenv("BATON_TEST_RABBITMQ_MANAGEMENT_URL");
  if (management == nullptr || *management == '\0') {
    GTEST_SKIP() << "BATON_TEST_RABBITMQ_MANAGEMENT_URL not set (make test sets it)";
  }
  const std::string q = QueueName();
  auto holder = Connect();
  ASSERT_NE(holder, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(holder->Publish(q, "m" + std::to_string(i)).ok());
  Inbox held(Inbox::Mode::kHold);
  auto sub = holder->Subscribe(q, 2, held.Handler());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(held.WaitForSize(2));

  RabbitMqOptions options = testing::TestOptions(url_.c_str());
  options.management_url = management;
  auto observer = RabbitMqBroker::Connect(options);
  ASSERT_TRUE(observer.ok()) << observer.status().ToString();
  QueueInfo last;
  bool seen = WaitFor(
      [&] {
        auto info = (*observer)->Queue(q);
        if (info.ok()) last = *info;
        return info.ok() && info->unacked == 2 && info->size == 1 && info->subscribers == 1;
      },
      std::chrono::seconds(15));
  EXPECT_TRUE(seen) << "last: size " << last.size << ", unacked " << last.unacked
                    << ", subscribers " << last.subscribers;
  // Listed although this broker object never used the queue.
  auto all = (*observer)->Queues();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(
      std::any_of(all->begin(), all->end(), [&](const QueueInfo& i) { return i.name == q; }));
  EXPECT_TRUE(std::is_sorted(all->begin(), all->end(), [](const QueueInfo& a, const QueueInfo& b) {
    return a.name < b.name;
  }));
  EXPECT_EQ((*observer)->Queue(q + ".missing").status().code(), StatusCode::kNotFound);
  for (auto& delivery : held.TakeHeld()) EXPECT_TRUE(delivery->Ack().ok());
}

TEST_F(RabbitMqBrokerTest, UnreachableManagementApiFallsBackToAmqp) {
  const std::string q = QueueName();
  RabbitMqOptions options = testing::TestOptions(url_.c_str());
  options.management_url = "http://guest:secret-pw@127.0.0.1:1";
  auto broker = RabbitMqBroker::Connect(options);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  ASSERT_TRUE((*broker)->Publish(q, "x").ok());
  auto info = (*broker)->Queue(q);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 1);
}

// The management API at BATON_TEST_RABBITMQ_MANAGEMENT_URL (http://user:password@host:port),
// for what AMQP cannot do: find and delete another connection's queue.
class ManagementClient {
 public:
  explicit ManagementClient(const std::string& url) {
    std::string rest = url.substr(url.find("://") + 3);
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    auto at = rest.rfind('@');
    std::string userinfo = rest.substr(0, at);
    base_ = "http://" + rest.substr(at + 1);
    auto sep = userinfo.find(':');
    user_ = userinfo.substr(0, sep);
    password_ = userinfo.substr(sep + 1);
  }

  // The vhost and name of each queue bound to `exchange`.
  std::vector<std::pair<std::string, std::string>> BoundQueues(const std::string& exchange) {
    std::vector<std::pair<std::string, std::string>> out;
    auto res = Send("GET", "/api/bindings");
    if (!res.ok() || res->status != 200) return out;
    for (const auto& b : nlohmann::json::parse(res->body)) {
      if (b.value("source", "") == exchange && b.value("destination_type", "") == "queue") {
        out.emplace_back(b.value("vhost", ""), b.value("destination", ""));
      }
    }
    return out;
  }

  // Closes the connection that owns exclusive queue `queue`, as a network failure would.
  // Empty when done, else what failed.
  std::string CloseOwnerOf(const std::string& vhost, const std::string& queue) {
    auto res = Send("GET", "/api/queues/" + PercentEncode(vhost) + "/" + PercentEncode(queue));
    if (!res.ok() || res->status != 200) {
      return "GET queue: " + (res.ok() ? res->body : res.status().ToString());
    }
    auto details = nlohmann::json::parse(res->body).value("owner_pid_details", nlohmann::json{});
    if (!details.contains("name")) return "no owner in " + res->body;
    auto closed =
        Send("DELETE", "/api/connections/" + PercentEncode(details["name"].get<std::string>()));
    if (!closed.ok() || closed->status != 204) {
      return "DELETE connection: " +
             (closed.ok() ? std::to_string(closed->status) : closed.status().ToString());
    }
    return "";
  }

 private:
  Result<http::ClientResponse> Send(const std::string& method, const std::string& path) {
    http::ClientRequest request;
    request.method = method;
    request.url = base_ + path;
    request.user = user_;
    request.password = password_;
    return http::Client().Send(request);
  }

  std::string base_;
  std::string user_;
  std::string password_;
};

const char* ManagementUrl() {
  const char* management = std::getenv("BATON_TEST_RABBITMQ_MANAGEMENT_URL");
  return management == nullptr || *management == '\0' ? nullptr : management;
}

// A broadcast subscription whose connection is closed under it (and its exclusive queue
// with it) reconnects, declares and binds a new queue and receives again; what was
// broadcast in between is lost, which the contract allows.
TEST_F(RabbitMqBrokerTest, BroadcastSubscriptionBindsAgainAfterItsConnectionIsClosed) {
  if (ManagementUrl() == nullptr) GTEST_SKIP() << "BATON_TEST_RABBITMQ_MANAGEMENT_URL not set";
  ManagementClient management(ManagementUrl());
  const std::string topic = QueueName();
  const std::string exchange = "baton.broadcast." + topic;
  auto broker = Connect();
  ASSERT_NE(broker, nullptr);
  std::mutex mu;
  std::vector<std::string> bodies;
  auto sub = broker->SubscribeBroadcast(topic, [&](std::string body) {
    std::lock_guard lock(mu);
    bodies.push_back(std::move(body));
  });
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  auto received = [&](const std::string& body) {
    std::lock_guard lock(mu);
    return std::find(bodies.begin(), bodies.end(), body) != bodies.end();
  };
  ASSERT_TRUE(broker->Broadcast(topic, "before").ok());
  ASSERT_TRUE(WaitFor([&] { return received("before"); }));

  std::vector<std::pair<std::string, std::string>> bound;
  ASSERT_TRUE(WaitFor([&] { return !(bound = management.BoundQueues(exchange)).empty(); },
                      std::chrono::seconds(10)));
  ASSERT_EQ(bound.size(), 1u);
  const std::string first_queue = bound[0].second;
  EXPECT_TRUE(first_queue.starts_with("amq.gen-")) << first_queue;
  // The queue's owner shows once RabbitMQ sampled its statistics.
  std::string closing;
  WaitFor([&] { return (closing = management.CloseOwnerOf(bound[0].first, first_queue)).empty(); },
          std::chrono::seconds(10));
  ASSERT_EQ(closing, "");

  // Broadcast until one arrives: those sent before the new binding are lost.
  int sent = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        EXPECT_TRUE(broker->Broadcast(topic, "after " + std::to_string(++sent)).ok());
        std::lock_guard lock(mu);
        return std::any_of(bodies.begin(), bodies.end(),
                           [](const std::string& b) { return b.starts_with("after "); });
      },
      std::chrono::seconds(10)));
  bound = management.BoundQueues(exchange);
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_NE(bound[0].second, first_queue);
}

// Broadcast subscriptions' server-named queues are exclusive to their connection: the
// management API lists them, but they are no engine queue, and inspecting one would fail.
TEST_F(RabbitMqBrokerTest, QueuesLeavesOutBroadcastSubscriptionQueues) {
  if (ManagementUrl() == nullptr) GTEST_SKIP() << "BATON_TEST_RABBITMQ_MANAGEMENT_URL not set";
  RabbitMqOptions options = testing::TestOptions(url_.c_str());
  options.management_url = ManagementUrl();
  auto broker = RabbitMqBroker::Connect(options);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  const std::string q = QueueName();
  ASSERT_TRUE((*broker)->Publish(q, "x").ok());
  const std::string topic = QueueName();
  auto sub = (*broker)->SubscribeBroadcast(topic, [](std::string) {});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  // Once the management API knows the subscription's queue.
  ManagementClient management(ManagementUrl());
  ASSERT_TRUE(WaitFor([&] { return !management.BoundQueues("baton.broadcast." + topic).empty(); },
                      std::chrono::seconds(10)));
  auto all = (*broker)->Queues();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(
      std::any_of(all->begin(), all->end(), [&](const QueueInfo& i) { return i.name == q; }));
  for (const QueueInfo& info : *all) EXPECT_FALSE(info.name.starts_with("amq.")) << info.name;
}

RabbitMqOptions OptionsFor(std::string url) {
  RabbitMqOptions options;
  options.url = std::move(url);
  return options;
}

TEST(RabbitMqBrokerConnectTest, UnreachableServerIsUnavailable) {
  auto broker = RabbitMqBroker::Connect(OptionsFor("amqp://guest:guest@127.0.0.1:1/"));
  ASSERT_FALSE(broker.ok());
  EXPECT_EQ(broker.status().code(), StatusCode::kUnavailable) << broker.status().ToString();
}

TEST(RabbitMqBrokerConnectTest, MalformedManagementUrlIsInvalidAndKeepsThePasswordOut) {
  RabbitMqOptions options = OptionsFor("amqp://guest:guest@127.0.0.1:1/");
  for (const char* bad : {"ftp://u:hunter2@host:15672", "http://u:hunter2@host:99999",
                          "http://u:hunter2@host:15672/api"}) {
    options.management_url = bad;
    auto broker = RabbitMqBroker::Connect(options);
    ASSERT_FALSE(broker.ok()) << bad;
    EXPECT_EQ(broker.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(broker.status().message().find("hunter2"), std::string::npos)
        << broker.status().message();
  }
}

class RabbitMqTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::optional<RabbitMqOptions> options = testing::TlsOptions();
    if (!options) GTEST_SKIP() << testing::kNotConfigured;
    options_ = *options;
    // A CA that signed nothing here: what a client that trusts the wrong CA has.
    auto made = testing::MakeTestCertificates(::testing::TempDir() + "/rabbitmq_tls_test");
    ASSERT_TRUE(made.has_value()) << "openssl could not make the test certificates";
    other_ca_ = made->other_ca;
  }
  RabbitMqOptions options_;
  std::string other_ca_;
};

TEST_F(RabbitMqTlsTest, ConnectsVerifyingTheServerAndShowingItsClientCertificate) {
  auto broker = RabbitMqBroker::Connect(options_);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  EXPECT_TRUE((*broker)->Health().ok());
}

TEST_F(RabbitMqTlsTest, AServerCertificateFromAnotherCaIsRefusedSayingWhichConnectionAndWhy) {
  options_.tls_ca = other_ca_;
  auto broker = RabbitMqBroker::Connect(options_);
  ASSERT_FALSE(broker.ok());
  EXPECT_EQ(broker.status().code(), StatusCode::kUnavailable);
  const std::string& message = broker.status().message();
  EXPECT_NE(message.find("RabbitMQ at localhost:"), std::string::npos) << message;
  EXPECT_NE(message.find("over TLS"), std::string::npos) << message;
  // RabbitMQ sends its CA with its certificate: OpenSSL finds that CA untrusted.
  EXPECT_NE(message.find("the server's certificate was refused: self-signed certificate in "
                         "certificate chain"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("guest:guest"), std::string::npos) << message;
}

// The server's alert says it ("certificate required") when the client reads it before its
// own write fails; otherwise the error points to the setting.
TEST_F(RabbitMqTlsTest, WithoutTheClientCertificateTheRefusalSaysSo) {
  options_.tls_cert.clear();
  options_.tls_key.clear();
  auto broker = RabbitMqBroker::Connect(options_);
  ASSERT_FALSE(broker.ok());
  EXPECT_EQ(broker.status().code(), StatusCode::kUnavailable);
  const std::string& message = broker.status().message();
  EXPECT_NE(message.find("RabbitMQ at localhost:"), std::string::npos) << message;
  EXPECT_TRUE(message.find("certificate required") != std::string::npos ||
              message.find("may require a client certificate (broker.rabbitmq.tls.cert)") !=
                  std::string::npos)
      << message;
}

TEST(RabbitMqBrokerConnectTest, TlsFilesAreRefusedWithAnAmqpUrlOrHalfGiven) {
  RabbitMqOptions options = OptionsFor("amqp://guest:guest@127.0.0.1:1/");
  options.tls_ca = "/etc/ssl/certs/ca-certificates.crt";
  auto plain = RabbitMqBroker::Connect(options);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plain.status().message().find("amqps://"), std::string::npos)
      << plain.status().message();
  options.url = "amqps://guest:guest@127.0.0.1:1/";
  options.tls_cert = "/nonexistent/client.pem";
  auto half = RabbitMqBroker::Connect(options);
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(half.status().message().find("broker.rabbitmq.tls.key"), std::string::npos)
      << half.status().message();
  options.tls_key = "/nonexistent/client.key";
  auto missing = RabbitMqBroker::Connect(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/client.pem is not a readable file"),
            std::string::npos)
      << missing.status().message();
}

TEST(RabbitMqBrokerConnectTest, MalformedUrlIsInvalid) {
  auto broker = RabbitMqBroker::Connect(OptionsFor("http://nope"));
  ASSERT_FALSE(broker.ok());
  EXPECT_EQ(broker.status().code(), StatusCode::kInvalidArgument) << broker.status().ToString();
}

}  // namespace
}  // namespace baton
