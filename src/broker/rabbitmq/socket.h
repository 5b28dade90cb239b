// Where a RabbitMqBroker connects, and the socket it connects with: plain TCP for amqp://,
// TLS for amqps:// (rabbitmq-c's OpenSSL socket: the server's certificate checked against
// the configured CA and its name against the URL's host, a client certificate when one is
// configured).
#pragma once

#include <amqp.h>
#include <sys/time.h>

#include <string>

#include "base/status.h"

namespace baton::rabbitmq_internal {

// The TLS files of RabbitMqOptions (paths to PEM files).
struct TlsFiles {
  std::string ca;    // empty: the system's CA bundle
  std::string cert;  // the client certificate (with its chain), or empty
  std::string key;   // the client certificate's key
};

struct ServerAddress {
  std::string host;
  int port = 5672;
  std::string user;
  std::string password;
  std::string vhost;
  bool tls = false;  // amqps://
  TlsFiles files;
};

// Parses an amqp:// or amqps:// URL (amqps: port 5671 by default). InvalidArgument for a
// malformed one, or TLS files given for an amqp:// URL (they would be silently unused),
// or a client certificate without its key (or a key without its certificate).
Result<ServerAddress> ParseUrl(const std::string& url, TlsFiles files);

// Opens the connection's socket to `address` within `timeout`. Unavailable, naming the
// server, whether over TLS, and why (the certificate check's reason when it failed: "certificate
// has expired", "unable to get local issuer certificate", "hostname mismatch"), when it
// cannot; InvalidArgument when a TLS file cannot be read.
Status OpenSocket(amqp_connection_state_t state, const ServerAddress& address, timeval timeout);

// What OpenSSL last said on this thread (for a TLS connection the server closed during the
// login: "tlsv13 alert certificate required"), or empty; the error queue is emptied.
std::string TlsErrorDetail();

// "RabbitMQ at host:port" (" over TLS" when it is): how errors name the connection.
std::string Describe(const ServerAddress& address);

}  // namespace baton::rabbitmq_internal
