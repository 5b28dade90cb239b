// AES-256-GCM (NIST SP 800-38D) through OpenSSL's EVP API: the cipher, and no more.
// Which key and nonce to use, and how a sealed value is written down, is keyring.h's.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baton::crypto {

inline constexpr std::size_t kKeyBytes = 32;    // AES-256
inline constexpr std::size_t kNonceBytes = 12;  // GCM's 96-bit IV
inline constexpr std::size_t kTagBytes = 16;    // GCM's full 128-bit tag

using Key = std::array<unsigned char, kKeyBytes>;

// The ciphertext of `plaintext` followed by its 16-byte tag, authenticating `aad` too.
// `nonce` must be kNonceBytes long and never used twice with the same key. kInternal only
// if OpenSSL fails (it does not for these sizes).
Result<std::string> Seal(const Key& key, std::string_view nonce, std::string_view aad,
                         std::string_view plaintext);

// The plaintext of what Seal returned. kFailedPrecondition when the tag does not verify
// (the ciphertext, nonce or `aad` was changed, or another key sealed it): never a
// partial or wrong plaintext.
Result<std::string> Open(const Key& key, std::string_view nonce, std::string_view aad,
                         std::string_view sealed);

// `n` bytes from OpenSSL's CSPRNG; kInternal if it cannot give them.
Result<std::string> RandomBytes(std::size_t n);

// Standard base64 (with padding), and its inverse (kInvalidArgument for text that is not
// the canonical base64 of some bytes: padding and the last character's unused bits too).
std::string Base64(std::string_view bytes);
Result<std::string> FromBase64(std::string_view text);

// The lowercase hex of SHA-256 over `bytes`.
std::string Sha256Hex(std::string_view bytes);

}  // namespace baton::crypto
