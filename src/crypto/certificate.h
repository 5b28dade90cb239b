// Checks of a certificate file before it is used to connect: a client certificate that
// has expired (or is not valid yet) is named with its dates at start-up, instead of
// surfacing as whatever the server's TLS alert became by the time the client read it.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace baton::crypto {

// Ok when `path` holds a PEM certificate valid now. InvalidArgument when it cannot be
// read or parsed; FailedPrecondition ("the certificate in PATH expired on 2026-12-06
// 07:54:31 UTC" / "is not valid before …") when now is outside its validity.
Status CheckCertificateFile(const std::string& path);

}  // namespace baton::crypto
