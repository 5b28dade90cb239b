#include "crypto/keyring.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

namespace baton::crypto {
namespace {

constexpr std::size_t kKeyIdChars = 8;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// The part of an envelope after the prefix: "<id>:<base64>".
std::string_view EnvelopeBody(std::string_view text) { return text.substr(kEnvelopePrefix.size()); }

}  // namespace

Result<Key> ParseKey(std::string_view text) {
  text = Trim(text);
  Key key{};
  if (text.size() == 2 * kKeyBytes) {
    bool hex = true;
    for (std::size_t i = 0; i < kKeyBytes && hex; ++i) {
      const int hi = HexDigit(text[2 * i]);
      const int lo = HexDigit(text[2 * i + 1]);
      if (hi < 0 || lo < 0) {
        hex = false;
      } else {
        key[i] = static_cast<unsigned char>(hi * 16 + lo);
      }
    }
    if (hex) return key;
  }
  Result<std::string> bytes = FromBase64(text);
  if (!bytes.ok() || bytes->size() != kKeyBytes) {
    return InvalidArgument(
        "not a key: a key is 32 bytes written as 64 hex digits or as base64 (44 characters)");
  }
  std::memcpy(key.data(), bytes->data(), kKeyBytes);
  return key;
}

Result<Key> GenerateKey() {
  BATON_ASSIGN_OR_RETURN(std::string bytes, RandomBytes(kKeyBytes));
  Key key{};
  std::memcpy(key.data(), bytes.data(), kKeyBytes);
  return key;
}

std::string EncodeKey(const Key& key) {
  return Base64(std::string_view(reinterpret_cast<const char*>(key.data()), key.size()));
}

std::string KeyId(const Key& key) {
  return Sha256Hex(std::string_view(reinterpret_cast<const char*>(key.data()), key.size()))
      .substr(0, kKeyIdChars);
}

bool IsEnvelope(std::string_view text) {
  return text.starts_with(kEnvelopePrefix) && !EnvelopeKeyId(text).empty();
}

std::string_view EnvelopeKeyId(std::string_view text) {
  if (!text.starts_with(kEnvelopePrefix)) return {};
  std::string_view body = EnvelopeBody(text);
  const std::size_t colon = body.find(':');
  if (colon != kKeyIdChars) return {};
  return body.substr(0, colon);
}

Result<Keyring> Keyring::Make(std::vector<Key> keys) {
  if (keys.empty()) return InvalidArgument("no encryption key");
  std::vector<std::string> ids;
  for (const Key& key : keys) {
    std::string id = KeyId(key);
    for (const std::string& seen : ids) {
      if (seen == id) return InvalidArgument(fmt::format("encryption key {} is given twice", id));
    }
    ids.push_back(std::move(id));
  }
  return Keyring(std::move(keys), std::move(ids));
}

Result<std::string> Keyring::Encrypt(std::string_view plaintext) const {
  const std::string header = fmt::format("{}{}", kEnvelopePrefix, primary_id());
  BATON_ASSIGN_OR_RETURN(std::string nonce, RandomBytes(kNonceBytes));
  BATON_ASSIGN_OR_RETURN(std::string sealed, Seal(keys_.front(), nonce, header, plaintext));
  return fmt::format("{}:{}", header, Base64(nonce + sealed));
}

Result<std::string> Keyring::Decrypt(std::string_view envelope) const {
  std::string_view id = EnvelopeKeyId(envelope);
  if (id.empty()) return InvalidArgument("not an encrypted value");
  const Key* key = nullptr;
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    if (ids_[i] == id) key = &keys_[i];
  }
  if (key == nullptr) {
    return FailedPrecondition(
        fmt::format("a secret is encrypted with key {}, which is not configured (configured: {})",
                    id, fmt::join(ids_, ", ")));
  }
  const std::size_t header_size = kEnvelopePrefix.size() + kKeyIdChars;
  Result<std::string> raw = FromBase64(envelope.substr(header_size + 1));
  if (!raw.ok() || raw->size() < kNonceBytes + kTagBytes) {
    return FailedPrecondition(fmt::format("a secret encrypted with key {} is damaged", id));
  }
  std::string_view all(*raw);
  Result<std::string> plain = Open(*key, all.substr(0, kNonceBytes),
                                   envelope.substr(0, header_size), all.substr(kNonceBytes));
  if (!plain.ok()) {
    return FailedPrecondition(
        fmt::format("a secret encrypted with key {}: {}", id, plain.status().message()));
  }
  return plain;
}

Result<std::vector<Key>> ReadKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return FailedPrecondition(
        fmt::format("cannot read key file {}: {}", path, std::strerror(errno)));
  }
  std::vector<Key> keys;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string_view text = Trim(line);
    if (text.empty() || text.front() == '#') continue;
    Result<Key> key = ParseKey(text);
    if (!key.ok()) {
      return InvalidArgument(
          fmt::format("key file {}, line {}: {}", path, number, key.status().message()));
    }
    keys.push_back(*key);
  }
  if (keys.empty()) return InvalidArgument(fmt::format("key file {} holds no key", path));
  return keys;
}

Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return FailedPrecondition(
        fmt::format("cannot open directory {} to sync it: {}", dir, std::strerror(errno)));
  }
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    return FailedPrecondition(fmt::format("cannot sync directory {}: {}", dir, std::strerror(err)));
  }
  return Status::Ok();
}

Status CreateFileWhole(const std::string& path, const std::string& text, std::string_view what,
                       const std::function<Status(const std::string& dir)>& sync_dir) {
  const std::string name = what.empty() ? path : fmt::format("{} {}", what, path);
  const std::string temp = fmt::format("{}.tmp-{}", path, ::getpid());
  auto fail = [&](std::string_view step, int err) {
    ::unlink(temp.c_str());
    std::string message = fmt::format("cannot {} {}: {}", step, name, std::strerror(err));
    if (err == EEXIST) return AlreadyExists(std::move(message));
    return FailedPrecondition(std::move(message));
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail("create", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return fail("write", err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("write", err);
  }
  ::close(fd);
  if (::link(temp.c_str(), path.c_str()) != 0) return fail("create", errno);
  ::unlink(temp.c_str());
  // The link (and the unlink) are durable only once the directory is: without this a power
  // loss could lose the file (a key after rows were encrypted under it).
  const std::string::size_type slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  Status synced = sync_dir(dir);
  if (!synced.ok()) {
    return FailedPrecondition(fmt::format("created {}, but {}", name, synced.message()));
  }
  return Status::Ok();
}

Status CreateKeyFile(const std::string& path,
                     const std::function<Status(const std::string& dir)>& sync_dir) {
  BATON_ASSIGN_OR_RETURN(Key key, GenerateKey());
  const std::string text = fmt::format(
      "# Baton's key for secrets at rest (AES-256-GCM, key id {}). Keep it: without it the\n"
      "# stored secrets cannot be read. Rotation: see docs/security.md.\n{}\n",
      KeyId(key), EncodeKey(key));
  return CreateFileWhole(path, text, "key file", sync_dir);
}

}  // namespace baton::crypto
