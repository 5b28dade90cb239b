#include "crypto/aead.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdint>
#include <memory>

namespace baton::crypto {
namespace {

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
unsigned char* Bytes(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

// OpenSSL takes lengths as int: values are bounded far below (a stored job is at most
// datastore.max_job_bytes), but say so rather than truncate.
Result<int> Length(std::string_view s) {
  if (s.size() > static_cast<std::size_t>(INT32_MAX / 2)) {
    return InvalidArgument("value too large to encrypt");
  }
  return static_cast<int>(s.size());
}

// AES-256-GCM, fetched from OpenSSL's providers once: passing EVP_aes_256_gcm() to each
// Init fetches it again every time (OpenSSL 3), which cost more than the cipher itself
// on short values.
const EVP_CIPHER* Cipher() {
  static EVP_CIPHER* const cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return cipher;
}

// A context set up for AES-256-GCM with `key` and `nonce`, for encrypting or decrypting.
Result<Ctx> Start(const Key& key, std::string_view nonce, bool encrypt) {
  if (nonce.size() != kNonceBytes) {
    return InvalidArgument(fmt::format("a nonce is {} bytes, not {}", kNonceBytes, nonce.size()));
  }
  if (Cipher() == nullptr) return Internal("OpenSSL: AES-256-GCM is not available");
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return Internal("OpenSSL: cannot allocate a cipher context");
  auto init = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
  // GCM's default IV length is the 96 bits we use, so key and IV go in one call.
  if (init(ctx.get(), Cipher(), nullptr, key.data(), Bytes(nonce)) != 1) {
    return Internal("OpenSSL: cannot set up AES-256-GCM");
  }
  return ctx;
}

}  // namespace

Result<std::string> Seal(const Key& key, std::string_view nonce, std::string_view aad,
                         std::string_view plaintext) {
  BATON_ASSIGN_OR_RETURN(Ctx ctx, Start(key, nonce, /*encrypt=*/true));
  BATON_ASSIGN_OR_RETURN(int aad_len, Length(aad));
  BATON_ASSIGN_OR_RETURN(int len, Length(plaintext));
  int out_len = 0;
  if (aad_len > 0 && EVP_EncryptUpdate(ctx.get(), nullptr, &out_len, Bytes(aad), aad_len) != 1) {
    return Internal("OpenSSL: AES-256-GCM failed on the associated data");
  }
  std::string out(plaintext.size() + kTagBytes, '\0');
  int written = 0;
  if (len > 0 && EVP_EncryptUpdate(ctx.get(), Bytes(out), &written, Bytes(plaintext), len) != 1) {
    return Internal("OpenSSL: AES-256-GCM encryption failed");
  }
  int last = 0;
  if (EVP_EncryptFinal_ex(ctx.get(), Bytes(out) + written, &last) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                          Bytes(out) + written + last) != 1) {
    return Internal("OpenSSL: AES-256-GCM encryption failed");
  }
  out.resize(static_cast<std::size_t>(written + last) + kTagBytes);
  return out;
}

Result<std::string> Open(const Key& key, std::string_view nonce, std::string_view aad,
                         std::string_view sealed) {
  if (sealed.size() < kTagBytes) {
    return FailedPrecondition("the encrypted value is shorter than its authentication tag");
  }
  std::string_view ciphertext = sealed.substr(0, sealed.size() - kTagBytes);
  std::string tag(sealed.substr(ciphertext.size()));
  BATON_ASSIGN_OR_RETURN(Ctx ctx, Start(key, nonce, /*encrypt=*/false));
  BATON_ASSIGN_OR_RETURN(int aad_len, Length(aad));
  BATON_ASSIGN_OR_RETURN(int len, Length(ciphertext));
  int out_len = 0;
  if (aad_len > 0 && EVP_DecryptUpdate(ctx.get(), nullptr, &out_len, Bytes(aad), aad_len) != 1) {
    return Internal("OpenSSL: AES-256-GCM failed on the associated data");
  }
  std::string out(ciphertext.size(), '\0');
  int written = 0;
  if (len > 0 && EVP_DecryptUpdate(ctx.get(), Bytes(out), &written, Bytes(ciphertext), len) != 1) {
    return Internal("OpenSSL: AES-256-GCM decryption failed");
  }
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                          Bytes(tag)) != 1) {
    return Internal("OpenSSL: cannot set the GCM tag");
  }
  int last = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), Bytes(out) + written, &last) != 1) {
    // The plaintext computed so far is discarded with `out`: nothing unauthenticated
    // leaves this function.
    return FailedPrecondition(
        "authentication failed: the encrypted value was altered or sealed with another key");
  }
  out.resize(static_cast<std::size_t>(written + last));
  return out;
}

Result<std::string> RandomBytes(std::size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(Bytes(out), static_cast<int>(n)) != 1) {
    return Internal("OpenSSL: no random bytes available");
  }
  return out;
}

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(Bytes(out), Bytes(bytes), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Result<std::string> FromBase64(std::string_view text) {
  if (text.empty()) return std::string();
  if (text.size() % 4 != 0) return InvalidArgument("not base64 (length not a multiple of 4)");
  std::string out(text.size() / 4 * 3, '\0');
  // EVP_DecodeBlock keeps the padding's zero bytes: take them off after.
  const int n = EVP_DecodeBlock(Bytes(out), Bytes(text), static_cast<int>(text.size()));
  if (n < 0) return InvalidArgument("not base64");
  std::size_t pad = 0;
  if (text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  // Canonical only: the unused bits of the last character must be zero, so that one value
  // has one text (a changed character of an envelope is never accepted as the same value).
  if (Base64(out) != text) return InvalidArgument("not canonical base64");
  return out;
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(Bytes(bytes), bytes.size(), digest);
  std::string out;
  out.reserve(2 * sizeof digest);
  for (unsigned char c : digest) out += fmt::format("{:02x}", c);
  return out;
}

}  // namespace baton::crypto
