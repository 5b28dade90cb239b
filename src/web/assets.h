// The web UI (web/), built at build time and embedded into the binary: every file of its
// build with its media type, served at `/` by the API (api.cc).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace baton::web {

struct Asset {
  std::string_view path;          // "/index.html", "/assets/index-3f2a.js"
  std::string_view content_type;  // for Content-Type
  std::string_view sha256;        // of its bytes, hex: its ETag
  std::string_view bytes;
};

// Every embedded file; empty when the binary was built without the UI (BATON_WEB=OFF).
std::span<const Asset> Assets();

// The file at `path`, or null.
const Asset* FindAsset(std::string_view path);

}  // namespace baton::web
