#include "auth/auth.h"

#include <crypt.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>

namespace baton::auth {
namespace {

std::string Hex(const unsigned char* data, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xf];
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding's bytes as zeros.
  std::size_t padding = 0;
  if (text.ends_with("==")) {
    padding = 2;
  } else if (text.ends_with("=")) {
    padding = 1;
  }
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

bool StartsWithScheme(std::string_view header, std::string_view scheme) {
  if (header.size() <= scheme.size() || header[scheme.size()] != ' ') return false;
  return std::equal(scheme.begin(), scheme.end(), header.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}

}  // namespace

Result<std::string> HashPassword(std::string_view password, int cost) {
  if (password.empty()) return InvalidArgument("password: must not be empty");
  if (password.find('\0') != std::string_view::npos) {
    return InvalidArgument("password: must not contain a NUL byte");
  }
  if (password.size() > 72) {
    return InvalidArgument(fmt::format(
        "password: {} bytes; the limit is 72 (bcrypt ignores the rest)", password.size()));
  }
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, salt, sizeof salt) ==
      nullptr) {
    return Internal(
        fmt::format("cannot make a bcrypt salt of cost {}: {}", cost, std::strerror(errno)));
  }
  crypt_data data{};
  std::string text(password);
  const char* hash = crypt_rn(text.c_str(), salt, &data, sizeof data);
  OPENSSL_cleanse(text.data(), text.size());
  if (hash == nullptr || hash[0] == '*') return Internal("bcrypt failed");
  std::string out(hash);
  OPENSSL_cleanse(&data, sizeof data);
  return out;
}

bool VerifyPassword(std::string_view password, const std::string& hash) {
  if (password.empty() || password.find('\0') != std::string_view::npos ||
      !hash.starts_with("$2")) {
    return false;
  }
  crypt_data data{};
  std::string text(password);
  const char* computed = crypt_rn(text.c_str(), hash.c_str(), &data, sizeof data);
  OPENSSL_cleanse(text.data(), text.size());
  bool same = computed != nullptr && computed[0] != '*' && std::strlen(computed) == hash.size() &&
              CRYPTO_memcmp(computed, hash.data(), hash.size()) == 0;
  OPENSSL_cleanse(&data, sizeof data);
  return same;
}

Result<std::string> RandomHex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), static_cast<int>(buffer.size())) != 1) {
    return Internal("OpenSSL has no random bytes to give");
  }
  return Hex(buffer.data(), buffer.size());
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return Hex(digest, sizeof digest);
}

Result<NewKey> MakeApiKey() {
  BATON_ASSIGN_OR_RETURN(auto random, RandomHex(32));
  NewKey key;
  key.key = "baton_" + random;
  key.hash = Sha256Hex(key.key);
  return key;
}

Credentials ParseAuthorization(std::string_view header) {
  Credentials out;
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  if (header.empty()) return out;
  out.kind = Credentials::Kind::kMalformed;
  if (StartsWithScheme(header, "basic")) {
    std::string_view encoded = header.substr(6);
    while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
    std::optional<std::string> decoded = Base64Decode(encoded);
    if (!decoded) return out;
    auto colon = decoded->find(':');
    if (colon == std::string::npos) return out;
    out.kind = Credentials::Kind::kBasic;
    out.username = decoded->substr(0, colon);
    out.secret = decoded->substr(colon + 1);
    OPENSSL_cleanse(decoded->data(), decoded->size());
  } else if (StartsWithScheme(header, "bearer")) {
    std::string_view token = header.substr(7);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    if (token.empty()) return out;
    out.kind = Credentials::Kind::kBearer;
    out.secret = std::string(token);
  }
  return out;
}

bool Authenticator::Verified(const std::string& username, const std::string& password,
                             const std::string& hash) {
  std::string digest = Sha256Hex(username + '\0' + password + '\0' + hash);
  {
    MutexLock lock(mu_);
    if (verified_.contains(digest)) return true;
  }
  // bcrypt outside the lock: concurrent logins do not wait for each other.
  if (!VerifyPassword(password, hash)) return false;
  MutexLock lock(mu_);
  if (verified_.emplace(digest, true).second) {
    verified_order_.push_back(digest);
    if (verified_order_.size() > kCacheSize) {
      verified_.erase(verified_order_.front());
      verified_order_.pop_front();
    }
  }
  return true;
}

Result<Principal> Authenticator::Authenticate(const Credentials& credentials) {
  using Kind = Credentials::Kind;
  if (credentials.kind == Kind::kNone) return NotFound("no credentials");
  if (credentials.kind == Kind::kMalformed) {
    return NotFound("the Authorization header is neither Basic nor Bearer credentials");
  }
  if (credentials.kind == Kind::kBearer) {
    Result<ApiKeyRecord> key = datastore_.GetApiKeyByHash(Sha256Hex(credentials.secret));
    if (!key.ok()) {
      if (key.status().code() == StatusCode::kNotFound) return NotFound("unknown API key");
      return key.status();
    }
    if (key->revoked_at) return NotFound("revoked API key");
    Result<UserRecord> user = datastore_.GetUser(key->username);
    if (!user.ok()) return user.status();
    return Principal{user->username, user->roles};
  }
  Result<UserRecord> user = datastore_.GetUser(credentials.username);
  if (!user.ok()) {
    if (user.status().code() != StatusCode::kNotFound) return user.status();
    // As long as a wrong password takes: the answer's time does not tell which users exist.
    std::call_once(decoy_once_, [this] {
      Result<std::string> decoy = HashPassword("decoy password", bcrypt_cost_);
      if (decoy.ok()) decoy_hash_ = std::move(*decoy);
    });
    if (!decoy_hash_.empty()) (void)VerifyPassword(credentials.secret, decoy_hash_);
    return NotFound("wrong credentials");
  }
  if (!Verified(credentials.username, credentials.secret, user->password_hash)) {
    return NotFound("wrong credentials");
  }
  return Principal{user->username, user->roles};
}

}  // namespace baton::auth
