#include "crypto/signing_key.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "crypto/keyring.h"

namespace baton::crypto {
namespace {

std::string Hex(const Key& key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : key) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

// Writes `text` to `path` (0600) through a file beside it linked into place: a crash leaves
// no half-written file, and the link fails (AlreadyExists) when another process made
// `path` first. The directory is synced, so the file survives a power loss.
Status CreateWhole(const std::string& path, const std::string& text) {
  const std::string temp = fmt::format("{}.tmp-{}", path, ::getpid());
  auto fail = [&](std::string_view what, int err) {
    ::unlink(temp.c_str());
    std::string message = fmt::format("cannot {} {}: {}", what, path, std::strerror(err));
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
  const int synced = ::fsync(fd);
  const int sync_err = errno;
  ::close(fd);
  if (synced != 0) return fail("write", sync_err);
  if (::link(temp.c_str(), path.c_str()) != 0) return fail("create", errno);
  ::unlink(temp.c_str());
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadOrCreateSigningKey(const std::string& path, bool* created) {
  *created = false;
  if (!std::filesystem::exists(path)) {
    BATON_ASSIGN_OR_RETURN(Key key, GenerateKey());
    const std::string text = fmt::format(
        "# Baton's key for webhook signatures (X-Baton-Signature, docs/webhooks.md): give\n"
        "# this line to the receivers, which check each call with it.\n{}\n",
        Hex(key));
    Status made = CreateWhole(path, text);
    if (!made.ok() && made.code() != StatusCode::kAlreadyExists) return made;
    *created = made.ok();
  }
  std::ifstream in(path);
  if (!in) return FailedPrecondition(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    return line;
  }
  return FailedPrecondition(fmt::format("{} holds no key (a line that is not a comment)", path));
}

}  // namespace baton::crypto
