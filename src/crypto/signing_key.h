// The key webhooks are signed with when none is configured: made at first start in the
// data directory (<data_dir>/webhooks.key, readable by its owner only, like secrets.key),
// so that every delivery is signed. The file holds comment lines ('#') and one line, the
// key: 64 hex digits, which a receiver uses as written (the HMAC key is that text).
#pragma once

#include <string>

#include "base/status.h"

namespace baton::crypto {

// The key in `path`, after making the file (a fresh random key, 0600, written whole,
// its directory synced) when it does not exist; `*created` says whether it was made.
// Errors name the file, never the key.
Result<std::string> ReadOrCreateSigningKey(const std::string& path, bool* created);

}  // namespace baton::crypto
