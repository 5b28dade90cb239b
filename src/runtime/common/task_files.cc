#include "runtime/common/task_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace baton::runtime {
namespace {

constexpr std::size_t kMaxQuotedBytes = 2 * 1024;

// Closes a descriptor on every path.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

std::string ErrnoText(int err) {
  char buf[128];
  // GNU strerror_r returns the message (maybe not in buf); XSI returns an int.
  auto r = strerror_r(err, buf, sizeof buf);
  if constexpr (std::is_same_v<decltype(r), char*>) {
    return r;
  } else {
    return r == 0 ? std::string(buf) : "errno " + std::to_string(err);
  }
}

Status ErrnoStatus(std::string what, int err) {
  StatusCode code =
      (err == ENOMEM || err == EAGAIN || err == EMFILE || err == ENFILE || err == ENOSPC)
          ? StatusCode::kUnavailable
          : StatusCode::kInternal;
  return {code, what + ": " + ErrnoText(err)};
}

Status WriteWholeFile(const std::string& path, std::string_view contents, mode_t mode) {
  FdCloser fd{open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)};
  if (fd.fd < 0) return ErrnoStatus("cannot create " + path, errno);
  while (!contents.empty()) {
    ssize_t n = write(fd.fd, contents.data(), contents.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write " + path, errno);
    }
    contents.remove_prefix(static_cast<std::size_t>(n));
  }
  // Whatever the umask: a container may run as another user.
  if (fchmod(fd.fd, mode) != 0) return ErrnoStatus("cannot chmod " + path, errno);
  return Status::Ok();
}

// The rules are validation's (core/job_decode.h), checked again here for rows that did
// not come through it (an older database, a hand-made message).
bool ValidFileName(std::string_view name) { return !FileNameProblem(name); }

bool ValidEnvName(std::string_view name) { return !name.empty() && !EnvNameProblem(name); }

std::optional<std::string> BadFileName(const StringMap& files) {
  for (const auto& [name, contents] : files) {
    if (!ValidFileName(name)) {
      return "invalid file name \"" + name +
             "\": a file name may not contain '/', be '.' or '..', or start with '" +
             std::string(kReservedPrefix) + "'";
    }
  }
  return std::nullopt;
}

std::optional<std::string> BadEnvName(const StringMap& env) {
  for (const auto& [name, value] : env) {
    if (!ValidEnvName(name)) return "invalid environment variable name \"" + name + "\"";
  }
  return std::nullopt;
}

std::string NamePart(std::string_view id, std::size_t max) {
  std::string out;
  for (char c : id.substr(0, max)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "task" : out;
}

std::optional<double> ParseProgress(std::string_view text) {
  auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return std::clamp(value, 0.0, 100.0);
}

std::optional<double> ReadProgressFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  FdCloser fd{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
  if (fd.fd < 0) return std::nullopt;
  char buf[64];
  ssize_t n = read(fd.fd, buf, sizeof buf);
  if (n <= 0) return std::nullopt;
  return ParseProgress(std::string_view(buf, static_cast<std::size_t>(n)));
}

std::string LastLines(std::string_view text, int count) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (count <= 0 || text.empty()) return "";
  std::size_t start = text.size();
  for (int lines = 0; lines < count; ++lines) {
    std::size_t nl = text.rfind('\n', start - 1);
    if (nl == std::string_view::npos) {
      start = 0;
      break;
    }
    start = nl;
    if (start == 0) break;
  }
  if (start < text.size() && text[start] == '\n') ++start;
  std::string_view lines = text.substr(start);
  if (lines.size() > kMaxQuotedBytes) lines = lines.substr(lines.size() - kMaxQuotedBytes);
  return std::string(lines);
}

Result<RunOutcome> ReadResultFile(const std::string& path, std::size_t max_bytes) {
  RunOutcome outcome;
  outcome.exit_code = 0;
  // The task may have put anything there: O_NONBLOCK so that a FIFO cannot block us,
  // O_NOFOLLOW so that a symlink does not make us read elsewhere.
  FdCloser fd{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
  if (fd.fd < 0) {
    if (errno == ENOENT) return outcome;  // nothing written: an empty result
    if (errno == ELOOP) return FailedOutcome("$BATON_OUTPUT is not a regular file", 0);
    return ErrnoStatus("cannot read " + path, errno);
  }
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) return ErrnoStatus("cannot read " + path, errno);
  if (!S_ISREG(st.st_mode)) return FailedOutcome("$BATON_OUTPUT is not a regular file", 0);
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    return FailedOutcome("result is " + std::to_string(size) + " bytes, over the " +
                             std::to_string(max_bytes) + "-byte limit",
                         0);
  }
  outcome.result.resize(static_cast<std::size_t>(size));
  std::size_t have = 0;
  while (have < outcome.result.size()) {
    ssize_t n = read(fd.fd, outcome.result.data() + have, outcome.result.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot read " + path, errno);
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  outcome.result.resize(have);
  return outcome;
}

FailReason StepFailReason(bool out_of_memory, bool timed_out, bool exited) {
  if (out_of_memory) return FailReason::kOutOfMemory;
  if (timed_out) return FailReason::kTimeout;
  return exited ? FailReason::kExit : FailReason::kError;
}

RunOutcome FailedOutcome(std::string error, std::optional<int> exit_code, FailReason reason) {
  RunOutcome outcome;
  outcome.state = RunOutcome::State::kFailed;
  outcome.error = std::move(error);
  outcome.exit_code = exit_code;
  outcome.reason = reason != FailReason::kNone ? reason
                   : exit_code                 ? FailReason::kExit
                                               : FailReason::kError;
  return outcome;
}

RunOutcome CancelledOutcome() {
  RunOutcome outcome;
  outcome.state = RunOutcome::State::kCancelled;
  outcome.error = "cancelled";
  return outcome;
}

std::string StepError(const std::string& label, const std::string& what, std::string_view output,
                      int tail_lines, bool with_output) {
  std::string error = label.empty() ? what : label + " failed: " + what;
  std::string lines = with_output ? LastLines(output, tail_lines) : "";
  if (!lines.empty()) error += "\n" + lines;
  return error;
}

}  // namespace baton::runtime
