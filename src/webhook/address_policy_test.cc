#include "webhook/address_policy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <vector>

namespace baton {
namespace {

// The bytes of a textual address, as the sender sees them when it connects.
std::vector<std::uint8_t> Ip(const char* text) {
  std::vector<std::uint8_t> out(16);
  if (inet_pton(AF_INET, text, out.data()) == 1) {
    out.resize(4);
  } else if (inet_pton(AF_INET6, text, out.data()) != 1) {
    ADD_FAILURE() << text << " is not an address";
  }
  return out;
}

std::string RefusalOf(const AddressPolicy& policy, const char* text) {
  return policy.Refusal(Ip(text));
}

TEST(AddressPolicyTest, RefusesEverySpecialPurposeAddressByDefault) {
  AddressPolicy policy;
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"127.0.0.1", "loopback"},
      {"127.255.0.9", "loopback"},
      {"::1", "loopback"},
      {"10.1.2.3", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},
      {"100.64.0.1", "private"},
      {"fd00::1", "private"},
      {"fc00::1", "private"},
      {"169.254.169.254", "link-local"},
      {"fe80::1", "link-local"},
      {"0.0.0.0", "unspecified"},
      {"::", "unspecified"},
      {"224.0.0.1", "multicast"},
      {"ff02::1", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved"},
      {"::ffff:127.0.0.1", "loopback"},
      {"::ffff:169.254.169.254", "link-local"},
      {"::ffff:10.0.0.1", "private"},
      {"64:ff9b::127.0.0.1", "loopback"},
      {"::127.0.0.1", "reserved"},
  };
  for (const auto& [address, rule] : cases) {
    EXPECT_EQ(RefusalOf(policy, address), rule) << address;
  }
}

TEST(AddressPolicyTest, AllowsPublicAddresses) {
  AddressPolicy policy;
  for (const char* address : {"93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1",
                              "2606:2800:220:1:248:1893:25c8:1946", "::ffff:8.8.8.8"}) {
    EXPECT_EQ(RefusalOf(policy, address), "") << address;
  }
}

TEST(AddressPolicyTest, AllowPrivateAllowsEverything) {
  AddressPolicy policy(true, {});
  for (const char* address : {"127.0.0.1", "::1", "10.0.0.1", "169.254.169.254", "fe80::1"}) {
    EXPECT_EQ(RefusalOf(policy, address), "") << address;
  }
}

TEST(AddressPolicyTest, AllowedNetworksAllowOnlyTheirAddresses) {
  AddressPolicy policy(
      false, {*ParseNetwork("127.0.0.1"), *ParseNetwork("10.1.0.0/16"), *ParseNetwork("fd00::/8")});
  EXPECT_EQ(RefusalOf(policy, "127.0.0.1"), "");
  EXPECT_EQ(RefusalOf(policy, "::ffff:127.0.0.1"), "");  // the same address, mapped
  EXPECT_EQ(RefusalOf(policy, "127.0.0.2"), "loopback");
  EXPECT_EQ(RefusalOf(policy, "10.1.200.3"), "");
  EXPECT_EQ(RefusalOf(policy, "10.2.0.1"), "private");
  EXPECT_EQ(RefusalOf(policy, "fd12::1"), "");
  EXPECT_EQ(RefusalOf(policy, "fc00::1"), "private");
  EXPECT_EQ(RefusalOf(policy, "169.254.169.254"), "link-local");
}

TEST(ParseNetworkTest, ReadsAddressesAndCidrs) {
  auto net = ParseNetwork("192.168.0.0/16");
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(net->size, 4u);
  EXPECT_EQ(net->bits, 16);
  net = ParseNetwork("::1");
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(net->size, 16u);
  EXPECT_EQ(net->bits, 128);
}

TEST(ParseNetworkTest, RefusesWhatIsNoNetworkSayingWhich) {
  EXPECT_EQ(ParseNetwork("example.com").status().message(),
            "\"example.com\" is not an IP address or CIDR network");
  EXPECT_EQ(ParseNetwork("10.0.0.0/33").status().message(),
            "\"10.0.0.0/33\": the prefix length is not a number 0..32");
  EXPECT_EQ(ParseNetwork("10.0.0.1/8").status().message(),
            "\"10.0.0.1/8\": bits are set past the prefix length 8");
  EXPECT_FALSE(ParseNetwork("10.0.0.0/").ok());
}

}  // namespace
}  // namespace baton
