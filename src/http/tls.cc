#include "http/tls.h"

#include <fmt/format.h>
#include <openssl/ssl.h>

namespace baton::http {
namespace {

namespace ssl = boost::asio::ssl;

Result<std::shared_ptr<ssl::context>> NewContext(const std::string& cert, const std::string& key) {
  std::shared_ptr<ssl::context> context;
  try {
    context = std::make_shared<ssl::context>(ssl::context::tls_server);
  } catch (const boost::system::system_error& e) {
    return Internal(fmt::format("cannot make a TLS context: {}", e.what()));
  }
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       ec);
  // TLS 1.2 is the oldest version without known breaks (RFC 8996 deprecates 1.0 and 1.1).
  if (!ec && SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION) != 1) {
    ec = boost::system::error_code(static_cast<int>(ERR_get_error()),
                                   boost::asio::error::get_ssl_category());
  }
  if (ec) return Internal(fmt::format("cannot set up TLS: {}", ec.message()));
  context->use_certificate_chain_file(cert, ec);
  if (ec) {
    return InvalidArgument(fmt::format("api.tls.cert \"{}\": {}", cert, ec.message()));
  }
  context->use_private_key_file(key, ssl::context::pem, ec);
  if (ec) return InvalidArgument(fmt::format("api.tls.key \"{}\": {}", key, ec.message()));
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return InvalidArgument(
        fmt::format("api.tls.key \"{}\" is not the key of api.tls.cert \"{}\"", key, cert));
  }
  return context;
}

}  // namespace

Status TlsContexts::Load() {
  BATON_ASSIGN_OR_RETURN(auto context, NewContext(cert_, key_));
  MutexLock lock(mu_);
  current_ = std::move(context);
  return Status::Ok();
}

std::shared_ptr<boost::asio::ssl::context> TlsContexts::Current() const {
  MutexLock lock(mu_);
  return current_;
}

}  // namespace baton::http
