#include "crypto/signing_key.h"

#include <fmt/format.h>

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

}  // namespace

Result<std::string> ReadOrCreateSigningKey(const std::string& path, bool* created) {
  *created = false;
  if (!std::filesystem::exists(path)) {
    BATON_ASSIGN_OR_RETURN(Key key, GenerateKey());
    const std::string text = fmt::format(
        "# Baton's key for webhook signatures (X-Baton-Signature, docs/webhooks.md): give\n"
        "# this line to the receivers, which check each call with it.\n{}\n",
        Hex(key));
    // Its directory synced as well as can be (the key is made again if it is lost).
    Status made = CreateFileWhole(path, text, "", [](const std::string& dir) {
      (void)SyncDirectory(dir);
      return Status::Ok();
    });
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
