#include "webhook/sender.h"

#include <gtest/gtest.h>

#include "testing/answer_server.h"

namespace baton {
namespace {

TEST(HmacSha256HexTest, IsTheHmacSha256InLowercaseHex) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(WebhookSignatureTest, SignsTheTimestampTheDeliveryIdAndTheBody) {
  EXPECT_EQ(WebhookSignature("k", 1700000000, "d1", "{}"),
            "t=1700000000,v1=" + HmacSha256Hex("k", "1700000000.d1.{}"));
  // Python: hmac.new(b"k", b"1700000000.d1.{}", hashlib.sha256).hexdigest()
  EXPECT_EQ(WebhookSignature("k", 1700000000, "d1", "{}"),
            "t=1700000000,v1=4de8c0e2a0060556f8273f7fe2fbea5467425d8403902a3bdab316dc06992099");
}

TEST(WebhookSignatureTest, ChangesWithTheKeyTimestampIdAndBody) {
  const std::string base = WebhookSignature("k1", 1, "d", "{}");
  EXPECT_NE(WebhookSignature("k2", 1, "d", "{}"), base);
  EXPECT_NE(WebhookSignature("k1", 2, "d", "{}").substr(4), base.substr(4));
  EXPECT_NE(WebhookSignature("k1", 1, "e", "{}"), base);
  EXPECT_NE(WebhookSignature("k1", 1, "d", "{ }"), base);
}

TEST(UrlHostTest, IsTheLowercaseHostWithoutPortOrUserInfo) {
  EXPECT_EQ(UrlHost("http://127.0.0.1:8080/x"), "127.0.0.1");
  EXPECT_EQ(UrlHost("https://Hooks.Example.COM/a?b#c"), "hooks.example.com");
  EXPECT_EQ(UrlHost("http://user:pw@host:1/"), "host");
  EXPECT_EQ(UrlHost("http://[::1]:9/"), "::1");
  EXPECT_EQ(UrlHost("not a url"), "");
}

TEST(CurlWebhookSenderTest, AConnectionRefusedIsNoStatusAndAnError) {
  CurlWebhookSender sender(AddressPolicy(false, {*ParseNetwork("127.0.0.1")}));
  // Port 1 on loopback: nothing listens there.
  WebhookResponse r =
      sender.Post("http://127.0.0.1:1/h", {}, "{}", std::chrono::seconds(5), [] { return false; });
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.error.empty());
  EXPECT_FALSE(r.refused);
}

constexpr const char* kRefusedLoopback =
    "refused by policy: the address is loopback (allowed only by webhooks.allow_private or "
    "webhooks.allowed_networks)";

TEST(CurlWebhookSenderTest, RefusesLoopbackByDefaultWithoutConnecting) {
  testing::AnswerServer server(std::nullopt, 200, "{}");
  CurlWebhookSender sender;

  WebhookResponse r =
      sender.Post(server.url() + "/h", {}, "{}", std::chrono::seconds(5), [] { return false; });

  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(r.error, kRefusedLoopback);
  EXPECT_EQ(server.requests(), 0);
}

TEST(CurlWebhookSenderTest, ARefusedAddressSaysTheSameWhetherAPortListensOrNot) {
  // No port scanner: an open port and a closed one answer alike.
  testing::AnswerServer server(std::nullopt, 200, "{}");
  CurlWebhookSender sender;
  auto post = [&](const std::string& url) {
    return sender.Post(url, {}, "{}", std::chrono::seconds(5), [] { return false; });
  };
  WebhookResponse open = post("http://127.0.0.1:" + std::to_string(server.port()) + "/");
  WebhookResponse closed = post("http://127.0.0.1:1/");
  EXPECT_EQ(open.error, closed.error);
  EXPECT_EQ(open.refused, closed.refused);
  EXPECT_EQ(closed.error, kRefusedLoopback);
}

TEST(CurlWebhookSenderTest, ChecksTheAddressANameResolvesTo) {
  testing::AnswerServer server(std::nullopt, 200, "{}");
  CurlWebhookSender sender;
  WebhookResponse r = sender.Post("http://localhost:" + std::to_string(server.port()) + "/", {},
                                  "{}", std::chrono::seconds(5), [] { return false; });
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(r.error, kRefusedLoopback);
  EXPECT_EQ(server.requests(), 0);
}

TEST(CurlWebhookSenderTest, RefusesTheMetadataAddressAsLinkLocal) {
  CurlWebhookSender sender;
  WebhookResponse r = sender.Post("http://169.254.169.254/latest/meta-data/", {}, "{}",
                                  std::chrono::seconds(5), [] { return false; });
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(r.error,
            "refused by policy: the address is link-local (allowed only by "
            "webhooks.allow_private or webhooks.allowed_networks)");
}

TEST(CurlWebhookSenderTest, CallsAnAllowedNetwork) {
  testing::AnswerServer server(std::nullopt, 204, "{}");
  CurlWebhookSender sender(AddressPolicy(false, {*ParseNetwork("127.0.0.0/8")}));
  WebhookResponse r =
      sender.Post(server.url() + "/h", {}, "{}", std::chrono::seconds(5), [] { return false; });
  EXPECT_EQ(r.status, 204) << r.error;
  EXPECT_EQ(server.requests(), 1);
}

TEST(CurlWebhookSenderTest, AllowPrivateCallsLoopback) {
  testing::AnswerServer server(std::nullopt, 200, "{}");
  CurlWebhookSender sender(AddressPolicy(true, {}));
  WebhookResponse r =
      sender.Post(server.url() + "/h", {}, "{}", std::chrono::seconds(5), [] { return false; });
  EXPECT_EQ(r.status, 200) << r.error;
}

}  // namespace
}  // namespace baton
