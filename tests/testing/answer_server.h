// A tiny HTTP(S) server for client tests, with certificates made by the test
// (test_certificates.h): a loopback server over Boost.Asio (TLS through its OpenSSL streams) that
// answers every request with one fixed response and keeps the last request it read. Link
// OpenSSL::SSL and Threads::Threads.
//
// Thread-safety: the server runs on its own thread; construct and destroy it on one.
#pragma once

#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "testing/test_certificates.h"

namespace baton::testing {

class AnswerServer {
 public:
  // Answers each request with `status` and `body` (JSON), then closes the connection;
  // over TLS with `certificates`, else plain HTTP.
  AnswerServer(std::optional<TestCertificates> certificates, int status, std::string body)
      : tls_(boost::asio::ssl::context::tls_server),
        acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}),
        response_("HTTP/1.1 " + std::to_string(status) +
                  " X\r\nContent-Type: application/json\r\nConnection: close\r\n"
                  "Content-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body),
        secure_(certificates.has_value()) {
    if (secure_) {
      tls_.use_certificate_chain_file(certificates->cert);
      tls_.use_private_key_file(certificates->key, boost::asio::ssl::context::pem);
    }
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~AnswerServer() {
    io_.stop();
    thread_.join();
  }
  AnswerServer(const AnswerServer&) = delete;
  AnswerServer& operator=(const AnswerServer&) = delete;

  int port() const { return port_; }
  std::string url() const {
    return std::string(secure_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }
  // How many requests were read (over TLS: after a handshake the client accepted).
  int requests() const { return requests_; }
  // The last request as it came: head and body.
  std::string last_request() const {
    std::lock_guard lock(mutex_);
    return last_request_;
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, boost::asio::ip::tcp::socket s) {
      if (ec) return;
      if (secure_) {
        boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream(std::move(s), tls_);
        boost::system::error_code handshake;
        stream.handshake(boost::asio::ssl::stream_base::server, handshake);
        if (!handshake) {  // else the client refused the certificate
          Serve(stream);
          stream.shutdown(handshake);
        }
      } else {
        Serve(s);
      }
      Accept();
    });
  }

  // One exchange, blocking this server's thread: tests send one request at a time.
  template <typename Stream>
  void Serve(Stream& stream) {
    boost::system::error_code ec;
    std::string request;
    std::size_t head =
        boost::asio::read_until(stream, boost::asio::dynamic_buffer(request), "\r\n\r\n", ec);
    if (ec) return;
    std::size_t length = 0;
    if (auto at = request.find("Content-Length: "); at != std::string::npos && at < head) {
      length = std::stoul(request.substr(at + 16));
    }
    if (request.size() < head + length) {
      boost::asio::read(stream, boost::asio::dynamic_buffer(request),
                        boost::asio::transfer_exactly(head + length - request.size()), ec);
    }
    {
      std::lock_guard lock(mutex_);
      last_request_ = request;
    }
    ++requests_;
    boost::asio::write(stream, boost::asio::buffer(response_), ec);
  }

  boost::asio::io_context io_;
  boost::asio::ssl::context tls_;
  boost::asio::ip::tcp::acceptor acceptor_;
  const std::string response_;
  const bool secure_;
  const int port_ = acceptor_.local_endpoint().port();
  std::atomic<int> requests_ = 0;
  mutable std::mutex mutex_;
  std::string last_request_;
  std::thread thread_;
};

}  // namespace baton::testing
