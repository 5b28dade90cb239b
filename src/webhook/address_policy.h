// Which addresses a webhook may be sent to: special-purpose addresses (loopback, private
// networks, link-local ones such as a cloud's metadata service at 169.254.169.254,
// unspecified, multicast, broadcast, reserved) are refused unless the configuration allows
// them (webhooks.allow_private, or a CIDR of webhooks.allowed_networks), so that a
// submitter cannot make the coordinator call its own host or network. The check is on
// the address a name resolved to, as it is connected to (CurlWebhookSender asks before
// each connection), so a name that resolves to another address the second time gains
// nothing. IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) IPv6 addresses are
// judged as the IPv4 address they carry.
//
// Thread-safety: immutable once built; Refusal may be called from several threads.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace baton {

// A CIDR network: an IPv4 (4 bytes) or IPv6 (16 bytes) prefix and its length in bits.
struct IpNetwork {
  std::array<std::uint8_t, 16> prefix{};
  std::size_t size = 4;  // 4 or 16
  int bits = 32;
};

// "10.0.0.0/8", "fd00::/8", or an address alone (a network of one). InvalidArgument
// naming `text` when it is neither, or when the prefix has bits set past its length.
Result<IpNetwork> ParseNetwork(std::string_view text);

class AddressPolicy {
 public:
  // Refuses every special-purpose address.
  AddressPolicy() = default;
  // `allow_private`: allows every address; `allowed`: allows the addresses in these
  // networks besides the public ones.
  AddressPolicy(bool allow_private, std::vector<IpNetwork> allowed);

  // Empty when `address` (4 or 16 bytes, network order) may be connected to; else the
  // rule that refuses it: "loopback", "private", "link-local", "unspecified",
  // "multicast", "broadcast" or "reserved".
  std::string Refusal(std::span<const std::uint8_t> address) const;

 private:
  bool allow_private_ = false;
  std::vector<IpNetwork> allowed_;
};

// The special-purpose class of `address` (4 or 16 bytes) as AddressPolicy names it;
// empty for a public address.
std::string SpecialPurpose(std::span<const std::uint8_t> address);

}  // namespace baton
