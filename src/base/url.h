// Percent-encoding (RFC 3986) of one URL component.
#pragma once

#include <string>
#include <string_view>

namespace baton {

// Every byte but the unreserved characters (A-Z a-z 0-9 - _ . ~) as %XX.
std::string PercentEncode(std::string_view text);
// %XX sequences back to bytes; anything else (a stray '%' included) as it is.
std::string PercentDecode(std::string_view text);

}  // namespace baton
