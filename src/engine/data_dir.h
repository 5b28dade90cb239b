// The data directory: made private to Baton's user before anything is stored in it.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace baton {

// Creates `dir` (and missing parents) with mode 0700, or tightens an existing `dir` to 0700,
// and makes what Baton keeps directly in it private to its owner: regular files (the
// SQLite database, its -wal and -shm, secrets.key) 0600, directories (tasks/, whose
// entries are the tasks' own working directories) 0700. A task running as another user,
// or anyone else on the host, can then open nothing in it.
//
// Refused, with an error naming the directory: a `dir` that is not a directory, or that
// belongs to another user than Baton's (tightening another user's directory would not
// make it private to Baton). Each path it tightened is appended to `tightened` (when not
// null), for the caller to log.
Status SecureDataDir(const std::string& dir, std::vector<std::string>* tightened = nullptr);

}  // namespace baton
