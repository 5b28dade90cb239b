// What every runtime does alike with a task's files and outcome: the names it accepts,
// writing files, reading $BATON_OUTPUT and $BATON_PROGRESS, and the texts of failures.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "core/job_decode.h"
#include "runtime/runtime.h"

namespace baton::runtime {

// The runtime's own files in a task directory start with this; task files may not.
inline constexpr std::string_view kReservedPrefix = kReservedFilePrefix;

std::string ErrnoText(int err);
// Unavailable for a lack of resources (ENOMEM, EAGAIN, EMFILE, ENFILE, ENOSPC), else
// Internal: "<what>: <strerror>".
Status ErrnoStatus(std::string what, int err);

// Creates (or truncates) `path`, not through a symlink, with `mode` whatever the umask.
Status WriteWholeFile(const std::string& path, std::string_view contents, mode_t mode);

// A `files` name: one path component, not reserved.
bool ValidFileName(std::string_view name);
// An environment variable name: non-empty, without '=' or NUL.
bool ValidEnvName(std::string_view name);
// What is wrong with the names of a task's (or a step's) `files`, or of its `env`: the
// first bad name, as the error that fails the task; nullopt when all are good.
std::optional<std::string> BadFileName(const StringMap& files);
std::optional<std::string> BadEnvName(const StringMap& env);
// A task id made safe for a directory or container name: at most `max` characters of
// [A-Za-z0-9_-], others replaced by '_'.
std::string NamePart(std::string_view id, std::size_t max);

// A progress value as a task writes it ("42.5\n"), clamped to 0..100; nullopt for
// anything else.
std::optional<double> ParseProgress(std::string_view text);
// The value in the progress file at `path`, if it holds one (never blocks: a FIFO or a
// symlink there is not followed).
std::optional<double> ReadProgressFile(const std::string& path);

// The last `count` lines of `text` (at most 2 KiB), without the final newline.
std::string LastLines(std::string_view text, int count);

// $BATON_OUTPUT after the task: its contents as the result (none: empty), or a failed
// outcome when it is not a regular file or is larger than `max_bytes`. An error only
// when it cannot be read.
Result<RunOutcome> ReadResultFile(const std::string& path, std::size_t max_bytes);

// Why a step that did not exit 0 failed: its memory limit, a timeout, an exit (a code or a
// signal), or else it could not run.
FailReason StepFailReason(bool out_of_memory, bool timed_out, bool exited);

// FAILED, for `reason`; without one, kExit when there is an exit code, else kError.
RunOutcome FailedOutcome(std::string error, std::optional<int> exit_code,
                         FailReason reason = FailReason::kNone);
RunOutcome CancelledOutcome();

// "<label> failed: <what>" (or just <what> without a label), then the last
// `tail_lines` lines of the output when `with_output`.
std::string StepError(const std::string& label, const std::string& what, std::string_view output,
                      int tail_lines, bool with_output = true);

}  // namespace baton::runtime
