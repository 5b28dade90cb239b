// Authentication: bcrypt password hashes (libxcrypt), API keys (OpenSSL's random bytes
// and SHA-256), the Authorization header, and the Authenticator that turns a request's
// credentials into a Principal against the datastore's users and keys (docs/auth.md).
//
// Thread-safety: the free functions are pure or thread-safe; Authenticator may be used
// from any thread (its cache of verified passwords is guarded by a mutex).
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "core/auth.h"
#include "datastore/datastore.h"

namespace baton::auth {

// bcrypt's cost (log2 of its rounds): 10 takes about 60 ms a hash on a server core.
inline constexpr int kDefaultBcryptCost = 10;

// A bcrypt hash ($2b$<cost>$...) of `password` with a fresh random salt. kInvalidArgument
// for an empty password, a NUL byte in it, or one over 72 bytes (bcrypt reads no further).
Result<std::string> HashPassword(std::string_view password, int cost = kDefaultBcryptCost);
// Whether `password` hashes to `hash`, compared in constant time.
bool VerifyPassword(std::string_view password, const std::string& hash);

// `bytes` random bytes (OpenSSL's RAND_bytes) as lowercase hex.
Result<std::string> RandomHex(std::size_t bytes);
// The SHA-256 of `text`, lowercase hex: how an API key is kept.
std::string Sha256Hex(std::string_view text);

// A new API key ("baton_" and 64 hex digits: 256 random bits) and its record's hash.
struct NewKey {
  std::string key;
  std::string hash;
};
Result<NewKey> MakeApiKey();

// What an Authorization header holds.
struct Credentials {
  enum class Kind { kNone, kBasic, kBearer, kMalformed };
  Kind kind = Kind::kNone;
  std::string username;  // kBasic
  std::string secret;    // kBasic: the password; kBearer: the key
};
// "Basic base64(user:password)" or "Bearer KEY" (scheme names in any case); an absent
// or empty header is kNone, anything else kMalformed.
Credentials ParseAuthorization(std::string_view header);

// Checks credentials against the datastore's users and API keys.
class Authenticator {
 public:
  // `bcrypt_cost`: the cost of the hash an unknown user's password is checked against,
  // so that a wrong username takes as long to refuse as a wrong password.
  explicit Authenticator(Datastore& datastore, int bcrypt_cost = kDefaultBcryptCost)
      : datastore_(datastore), bcrypt_cost_(bcrypt_cost) {}

  // The user the credentials name. kNotFound when they are wrong (an unknown user, a
  // wrong password, an unknown or revoked key: the API answers 401 without saying
  // which); the datastore's error when it fails. A password once verified against a
  // user's hash is remembered (by a SHA-256 of user, password and hash), so a client
  // sending basic credentials with every request pays bcrypt once.
  Result<Principal> Authenticate(const Credentials& credentials);

 private:
  bool Verified(const std::string& username, const std::string& password, const std::string& hash);

  Datastore& datastore_;
  const int bcrypt_cost_;
  std::once_flag decoy_once_;
  std::string decoy_hash_;  // set once, under decoy_once_
  Mutex mu_;
  // Digests of (username, password, hash) verified, oldest first, at most kCacheSize.
  static constexpr std::size_t kCacheSize = 1024;
  std::list<std::string> verified_order_ BATON_GUARDED_BY(mu_);
  std::unordered_map<std::string, bool> verified_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton::auth
