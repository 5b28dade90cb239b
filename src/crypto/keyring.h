// The keys secrets are encrypted with at rest, and the envelope a stored secret is written
// in:
//
//   baton:aes256gcm:<key id>:<base64 of nonce (12 bytes) || ciphertext || tag (16 bytes)>
//
// The key id is the first 8 hex digits of SHA-256 over the key: it names a key without
// revealing it, so several keys can be configured (the primary, which encrypts, and older
// ones, which only decrypt until `baton secrets rotate` has re-encrypted everything) and
// the right one is picked on read. The envelope's prefix up to the last colon is the
// associated data, so its key id cannot be swapped either. A fresh random nonce per value:
// the same secret stored twice looks different each time.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "crypto/aead.h"

namespace baton::crypto {

inline constexpr std::string_view kEnvelopePrefix = "baton:aes256gcm:";

// A key written as 64 hex digits or as base64 of 32 bytes. The error never quotes the text.
Result<Key> ParseKey(std::string_view text);
// A fresh random key, and the base64 a key file holds it as.
Result<Key> GenerateKey();
std::string EncodeKey(const Key& key);
// The 8 hex digits naming `key` in envelopes.
std::string KeyId(const Key& key);

// True for text written by Keyring::Encrypt (by any key).
bool IsEnvelope(std::string_view text);
// The key id of an envelope ("" when `text` is not one).
std::string_view EnvelopeKeyId(std::string_view text);

// Immutable once made, so thread-safe.
class Keyring {
 public:
  // `keys` primary first; kInvalidArgument when empty or when a key repeats.
  static Result<Keyring> Make(std::vector<Key> keys);

  const std::string& primary_id() const { return ids_.front(); }
  const std::vector<std::string>& ids() const { return ids_; }

  // The envelope of `plaintext` under the primary key.
  Result<std::string> Encrypt(std::string_view plaintext) const;
  // The plaintext of an envelope. kFailedPrecondition, naming the key id, for an envelope
  // whose key is not configured or that does not authenticate; kInvalidArgument for text
  // that is not an envelope. Never quotes the envelope or a plaintext.
  Result<std::string> Decrypt(std::string_view envelope) const;
  // True when `text` is an envelope under the primary key (nothing to rotate).
  bool IsCurrent(std::string_view text) const { return EnvelopeKeyId(text) == primary_id(); }

 private:
  Keyring(std::vector<Key> keys, std::vector<std::string> ids)
      : keys_(std::move(keys)), ids_(std::move(ids)) {}

  std::vector<Key> keys_;
  std::vector<std::string> ids_;  // ids_[i] names keys_[i]
};

// The keys of a key file: one per line (hex or base64), the primary first; blank lines and
// lines starting with '#' are ignored. Errors name the file and the line, not its text.
Result<std::vector<Key>> ReadKeyFile(const std::string& path);
// Flushes a directory's entries to disk (fsync of the directory): a file linked into it
// survives a power loss only once its directory is synced.
Status SyncDirectory(const std::string& dir);

// Writes `text` to a new file `path` (0600): written whole beside it, then linked into
// place, so a crash leaves no half-written file and the link fails (kAlreadyExists) when
// another process created `path` first; then its directory is synced through `sync_dir`
// (a power loss keeps the file). `what` names the file in errors ("key file").
Status CreateFileWhole(
    const std::string& path, const std::string& text, std::string_view what,
    const std::function<Status(const std::string& dir)>& sync_dir = SyncDirectory);

// Writes a new key file holding one fresh key, readable by its owner only (0600), failing
// (kAlreadyExists) if `path` exists; its directory must exist. The key is fsync'd, then
// linked into place, then its directory is synced through `sync_dir` (SyncDirectory; a
// test passes its own) before this returns: rows are encrypted under the key only after
// it is durable, so a power loss cannot leave rows under a key that is gone.
Status CreateKeyFile(const std::string& path,
                     const std::function<Status(const std::string& dir)>& sync_dir = SyncDirectory);

}  // namespace baton::crypto
