#include "webhook/sender.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(WebhookSignatureTest, IsTheHmacSha256OfTheBodyInHex) {
  // RFC 4231, test case 2.
  EXPECT_EQ(WebhookSignature("Jefe", "what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(WebhookSignatureTest, ChangesWithTheKeyAndTheBody) {
  EXPECT_NE(WebhookSignature("k1", "{}"), WebhookSignature("k2", "{}"));
  EXPECT_NE(WebhookSignature("k1", "{}"), WebhookSignature("k1", "{ }"));
}

TEST(UrlHostTest, IsTheLowercaseHostWithoutPortOrUserInfo) {
  EXPECT_EQ(UrlHost("http://127.0.0.1:8080/x"), "127.0.0.1");
  EXPECT_EQ(UrlHost("https://Hooks.Example.COM/a?b#c"), "hooks.example.com");
  EXPECT_EQ(UrlHost("http://user:pw@host:1/"), "host");
  EXPECT_EQ(UrlHost("http://[::1]:9/"), "::1");
  EXPECT_EQ(UrlHost("not a url"), "");
}

TEST(CurlWebhookSenderTest, AConnectionRefusedIsNoStatusAndAnError) {
  CurlWebhookSender sender;
  // Port 1 on loopback: nothing listens there.
  WebhookResponse r =
      sender.Post("http://127.0.0.1:1/h", {}, "{}", std::chrono::seconds(5), [] { return false; });
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.error.empty());
}

}  // namespace
}  // namespace baton
