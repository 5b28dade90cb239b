// The server's TLS certificate: loaded from PEM files, swapped whole on reload, so that
// each new connection takes the latest and open connections keep the one they began with.
//
// Thread-safety: thread-safe (an annotated mutex guards the current context).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "base/mutex.h"
#include "base/status.h"

namespace baton::http {

class TlsContexts {
 public:
  TlsContexts(std::string cert, std::string key) : cert_(std::move(cert)), key_(std::move(key)) {}

  // Reads the files; on failure the current context stays and the error says why.
  Status Load() BATON_EXCLUDES(mu_);
  std::shared_ptr<boost::asio::ssl::context> Current() const BATON_EXCLUDES(mu_);

 private:
  const std::string cert_;
  const std::string key_;
  mutable Mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton::http
