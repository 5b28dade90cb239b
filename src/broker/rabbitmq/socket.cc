#include "broker/rabbitmq/socket.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <vector>

#include "crypto/certificate.h"

namespace baton::rabbitmq_internal {
namespace {

// Where Debian's ca-certificates puts the system's trusted CAs.
constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";

// The first reason the server's certificate failed the check, on the thread that runs the
// handshake (Connection::Open's).
thread_local std::string verify_failure;

int RecordVerifyFailure(int ok, X509_STORE_CTX* ctx) {
  if (!ok && verify_failure.empty()) {
    const int err = X509_STORE_CTX_get_error(ctx);
    verify_failure = X509_verify_cert_error_string(err);
    if (X509* cert = X509_STORE_CTX_get_current_cert(ctx)) {
      char subject[256];
      X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
      verify_failure += fmt::format(" (certificate {})", subject);
    }
  }
  return ok;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

Status CheckReadable(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return InvalidArgument(fmt::format("{}: {} is not a readable file", what, path));
  }
  return Status::Ok();
}

// A TLS socket set up to check the server (CA, name) and to show the client certificate.
Result<amqp_socket_t*> NewTlsSocket(amqp_connection_state_t state, const ServerAddress& address) {
  amqp_socket_t* socket = amqp_ssl_socket_new(state);
  if (socket == nullptr) return Internal("amqp_ssl_socket_new failed");
  const std::string ca = address.files.ca.empty() ? kSystemCaBundle : address.files.ca;
  BATON_RETURN_IF_ERROR(CheckReadable(ca, "broker.rabbitmq.tls.ca"));
  if (amqp_ssl_socket_set_cacert(socket, ca.c_str()) != AMQP_STATUS_OK) {
    return InvalidArgument(fmt::format("broker.rabbitmq.tls.ca: {} holds no PEM certificate: {}",
                                       ca, TlsErrorDetail()));
  }
  if (!address.files.cert.empty()) {
    BATON_RETURN_IF_ERROR(CheckReadable(address.files.cert, "broker.rabbitmq.tls.cert"));
    // An expired one is said so with its date: the server's alert reaches the login's
    // error only when it is read before the client's own write fails.
    if (Status valid = crypto::CheckCertificateFile(address.files.cert); !valid.ok()) {
      return Status(valid.code(), fmt::format("connecting to {}: the client certificate "
                                              "(broker.rabbitmq.tls.cert): {}",
                                              Describe(address), valid.message()));
    }
    BATON_RETURN_IF_ERROR(CheckReadable(address.files.key, "broker.rabbitmq.tls.key"));
    if (amqp_ssl_socket_set_key(socket, address.files.cert.c_str(), address.files.key.c_str()) !=
        AMQP_STATUS_OK) {
      return InvalidArgument(fmt::format(
          "broker.rabbitmq.tls.cert/key: {} and {} are not a PEM certificate and its key: {}",
          address.files.cert, address.files.key, TlsErrorDetail()));
    }
  }
  if (amqp_ssl_socket_set_ssl_versions(socket, AMQP_TLSv1_2, AMQP_TLSvLATEST) != AMQP_STATUS_OK) {
    return Internal("TLS 1.2 or later is not available");
  }
  amqp_ssl_socket_set_verify_peer(socket, 1);
  amqp_ssl_socket_set_verify_hostname(socket, 1);
  // The check made in the handshake (not only after it), so that its reason is known.
  auto* ctx = static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket));
  if (ctx == nullptr) return Internal("rabbitmq-c gave no TLS context");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, RecordVerifyFailure);
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  const int named = IsIpLiteral(address.host)
                        ? X509_VERIFY_PARAM_set1_ip_asc(param, address.host.c_str())
                        : X509_VERIFY_PARAM_set1_host(param, address.host.c_str(), 0);
  if (named != 1) return Internal("setting the TLS name to check failed");
  return socket;
}

}  // namespace

Result<ServerAddress> ParseUrl(const std::string& url, TlsFiles files) {
  if (url.empty()) return InvalidArgument("RabbitMQ URL is empty");
  std::vector<char> buffer(url.begin(), url.end());
  buffer.push_back('\0');
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(buffer.data(), &info) != AMQP_STATUS_OK) {
    // Not echoed: it may hold the password.
    return InvalidArgument("malformed RabbitMQ URL (want amqp://user:password@host:port/vhost)");
  }
  const bool any_file = !files.ca.empty() || !files.cert.empty() || !files.key.empty();
  if (!info.ssl && any_file) {
    return InvalidArgument(
        "broker.rabbitmq.tls.*: TLS files are set but broker.rabbitmq.url is amqp://, which "
        "does not use them (amqps:// does)");
  }
  if (files.cert.empty() != files.key.empty()) {
    return InvalidArgument(
        "broker.rabbitmq.tls.cert and broker.rabbitmq.tls.key: set both (a client certificate "
        "and its key) or neither");
  }
  // "amqp://host:port/" names the empty vhost by the AMQP URI spec, which nobody means:
  // take it as the default vhost "/".
  if (info.vhost == nullptr || *info.vhost == '\0') info.vhost = const_cast<char*>("/");
  return ServerAddress{.host = info.host,
                       .port = info.port,
                       .user = info.user,
                       .password = info.password,
                       .vhost = info.vhost,
                       .tls = info.ssl != 0,
                       .files = std::move(files)};
}

std::string Describe(const ServerAddress& address) {
  return fmt::format("RabbitMQ at {}:{}{}", address.host, address.port,
                     address.tls ? " over TLS" : "");
}

Status OpenSocket(amqp_connection_state_t state, const ServerAddress& address, timeval timeout) {
  amqp_socket_t* socket = nullptr;
  if (address.tls) {
    BATON_ASSIGN_OR_RETURN(socket, NewTlsSocket(state, address));
  } else {
    socket = amqp_tcp_socket_new(state);
    if (socket == nullptr) return Internal("amqp_tcp_socket_new failed");
  }
  verify_failure.clear();
  ERR_clear_error();
  const int rc = amqp_socket_open_noblock(socket, address.host.c_str(), address.port, &timeout);
  if (rc == AMQP_STATUS_OK) return Status::Ok();
  std::string why = amqp_error_string2(rc);
  if (!verify_failure.empty()) {
    why = "the server's certificate was refused: " + verify_failure;
  } else if (std::string detail = TlsErrorDetail(); !detail.empty()) {
    why += ": " + detail;
  }
  return Unavailable(fmt::format("connecting to {}: {}", Describe(address), why));
}

std::string TlsErrorDetail() {
  std::string reason;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    reason = text;
  }
  return reason;
}

}  // namespace baton::rabbitmq_internal
