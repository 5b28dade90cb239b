// RabbitMQ's management HTTP API (the rabbitmq_management plugin), for queue statistics
// across every process: messages ready, delivered but unacked, and consumers. AMQP alone
// gives only the first and the last.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "broker/broker.h"

namespace baton::rabbitmq_internal {

class ManagementApi {
 public:
  // `url`: http(s)://[user:password@]host:port[/]. Without credentials in it, `user` and
  // `password` (the AMQP ones) are used. An https server's certificate must chain to
  // `ca_file` (empty: the system's CAs). InvalidArgument for anything else. Error texts
  // name host:port, never the password.
  static Result<ManagementApi> Parse(std::string_view url, std::string user, std::string password,
                                     std::string ca_file = "");

  // NotFound for an unknown queue; Unavailable when the API does not answer.
  Result<QueueInfo> Queue(std::string_view vhost, std::string_view name) const;
  // Every queue of the virtual host, sorted by name.
  Result<std::vector<QueueInfo>> Queues(std::string_view vhost) const;

  const std::string& where() const { return where_; }

 private:
  ManagementApi() = default;
  Result<std::string> Get(const std::string& path) const;

  std::string scheme_ = "http";
  std::string ca_file_;
  std::string host_;
  int port_ = 15672;
  std::string user_;
  std::string password_;
  std::string where_;  // host:port, for messages
};

}  // namespace baton::rabbitmq_internal
