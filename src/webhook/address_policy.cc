#include "webhook/address_policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace baton {
namespace {

using Bytes = std::span<const std::uint8_t>;

// True when the first `bits` bits of `a` and `b` agree.
bool SamePrefix(Bytes a, Bytes b, int bits) {
  for (int i = 0; bits > 0; ++i, bits -= 8) {
    const int mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((a[i] & mask) != (b[i] & mask)) return false;
  }
  return true;
}

// The IPv4 address an IPv6 one carries (IPv4-mapped ::ffff:0:0/96, NAT64's well-known
// 64:ff9b::/96); empty when it carries none.
Bytes EmbeddedIpv4(Bytes a) {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr std::uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::equal(a.begin(), a.begin() + 12, kMapped) ||
      std::equal(a.begin(), a.begin() + 12, kNat64)) {
    return a.subspan(12);
  }
  return {};
}

std::string Ipv4Class(Bytes a) {
  const std::uint8_t b0 = a[0], b1 = a[1];
  if (b0 == 0) return "unspecified";  // 0.0.0.0/8: Linux connects 0.0.0.0 to this host
  if (b0 == 127) return "loopback";
  if (b0 == 10 || (b0 == 172 && (b1 & 0xf0) == 16) || (b0 == 192 && b1 == 168) ||
      (b0 == 100 && (b1 & 0xc0) == 64)) {  // RFC 1918; 100.64/10, shared (RFC 6598)
    return "private";
  }
  if (b0 == 169 && b1 == 254) return "link-local";
  if ((b0 & 0xf0) == 224) return "multicast";
  if (std::all_of(a.begin(), a.end(), [](std::uint8_t b) { return b == 0xff; })) {
    return "broadcast";
  }
  if ((b0 & 0xf0) == 240) return "reserved";
  return "";
}

std::string Ipv6Class(Bytes a) {
  if (Bytes v4 = EmbeddedIpv4(a); !v4.empty()) return Ipv4Class(v4);
  const bool zero_head =
      std::all_of(a.begin(), a.begin() + 15, [](std::uint8_t b) { return b == 0; });
  if (zero_head && a[15] == 0) return "unspecified";
  if (zero_head && a[15] == 1) return "loopback";
  if (a[0] == 0) return "reserved";             // ::/8, IPv4-compatible addresses among them
  if ((a[0] & 0xfe) == 0xfc) return "private";  // fc00::/7, unique local
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return "link-local";  // fe80::/10
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return "private";     // fec0::/10, site-local
  if (a[0] == 0xff) return "multicast";
  return "";
}

}  // namespace

Result<IpNetwork> ParseNetwork(std::string_view text) {
  std::string_view address = text.substr(0, text.find('/'));
  IpNetwork net;
  const std::string copy(address);
  if (inet_pton(AF_INET, copy.c_str(), net.prefix.data()) == 1) {
    net.size = 4;
  } else if (inet_pton(AF_INET6, copy.c_str(), net.prefix.data()) == 1) {
    net.size = 16;
  } else {
    return InvalidArgument(fmt::format("\"{}\" is not an IP address or CIDR network", text));
  }
  const int max_bits = static_cast<int>(net.size) * 8;
  net.bits = max_bits;
  if (address.size() < text.size()) {
    std::string_view length = text.substr(address.size() + 1);
    auto [ptr, ec] = std::from_chars(length.data(), length.data() + length.size(), net.bits);
    if (ec != std::errc() || ptr != length.data() + length.size() || net.bits < 0 ||
        net.bits > max_bits) {
      return InvalidArgument(
          fmt::format("\"{}\": the prefix length is not a number 0..{}", text, max_bits));
    }
  }
  for (int bit = net.bits; bit < max_bits; ++bit) {
    if (net.prefix[bit / 8] & (0x80 >> (bit % 8))) {
      return InvalidArgument(
          fmt::format("\"{}\": bits are set past the prefix length {}", text, net.bits));
    }
  }
  return net;
}

std::string SpecialPurpose(Bytes address) {
  if (address.size() == 4) return Ipv4Class(address);
  if (address.size() == 16) return Ipv6Class(address);
  return "reserved";
}

AddressPolicy::AddressPolicy(bool allow_private, std::vector<IpNetwork> allowed)
    : allow_private_(allow_private), allowed_(std::move(allowed)) {}

std::string AddressPolicy::Refusal(Bytes address) const {
  std::string rule = SpecialPurpose(address);
  if (rule.empty() || allow_private_) return "";
  // An IPv4 network allows the IPv6 forms that carry its addresses too.
  Bytes v4 = address.size() == 16 ? EmbeddedIpv4(address) : address;
  for (const IpNetwork& net : allowed_) {
    Bytes prefix(net.prefix.data(), net.size);
    if (net.size == address.size() && SamePrefix(address, prefix, net.bits)) return "";
    if (net.size == 4 && v4.size() == 4 && SamePrefix(v4, prefix, net.bits)) return "";
  }
  return rule;
}

}  // namespace baton
