#include "http/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio.hpp>

#include "testing/answer_server.h"

namespace baton::http {
namespace {

using testing::AnswerServer;
using ::testing::HasSubstr;
using ::testing::Not;

ClientRequest To(std::string url, std::string method = "GET") {
  ClientRequest request;
  request.url = std::move(url);
  request.method = std::move(method);
  return request;
}

TEST(HttpClientTest, SendsTheMethodHeadersAndBodyAndReadsTheAnswer) {
  AnswerServer server(std::nullopt, 201, R"({"id":"j1"})");
  ClientRequest request = To(server.url() + "/jobs?x=1", "POST");
  request.headers = {{"Content-Type", "text/yaml"}, {"X-Baton-Attempt", "2"}};
  request.body = "name: j\n";

  auto response = Client().Send(request);

  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->body, R"({"id":"j1"})");
  EXPECT_EQ(response->Header("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(response->Header("x-missing"), std::nullopt);
  std::string sent = server.last_request();
  EXPECT_THAT(sent, ::testing::StartsWith("POST /jobs?x=1 HTTP/1.1\r\n"));
  EXPECT_THAT(sent, HasSubstr("\r\nContent-Type: text/yaml\r\n"));
  EXPECT_THAT(sent, HasSubstr("\r\nX-Baton-Attempt: 2\r\n"));
  EXPECT_THAT(sent, HasSubstr("\r\nContent-Length: 8\r\n"));
  EXPECT_THAT(sent, Not(HasSubstr("Expect:")));
  EXPECT_THAT(sent, ::testing::EndsWith("\r\n\r\nname: j\n"));
}

TEST(HttpClientTest, APutWithoutABodySaysItsLengthIsZero) {
  // A server that waits for a body of unknown length would wait for the timeout.
  AnswerServer server(std::nullopt, 200, "{}");

  auto response = Client().Send(To(server.url() + "/jobs/1/cancel", "PUT"));

  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_THAT(server.last_request(), ::testing::StartsWith("PUT /jobs/1/cancel HTTP/1.1\r\n"));
  EXPECT_THAT(server.last_request(), HasSubstr("\r\nContent-Length: 0\r\n"));
}

TEST(HttpClientTest, SendsBasicCredentials) {
  AnswerServer server(std::nullopt, 200, "{}");
  ClientRequest request = To(server.url() + "/api/queues");
  request.user = "guest";
  request.password = "guest";

  ASSERT_TRUE(Client().Send(request).ok());

  EXPECT_THAT(server.last_request(), HasSubstr("\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n"));
}

TEST(HttpClientTest, AnErrorStatusIsAResponseNotAnError) {
  AnswerServer server(std::nullopt, 503, R"({"message":"busy"})");

  auto response = Client().Send(To(server.url()));

  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(response->body, R"({"message":"busy"})");
}

TEST(HttpClientTest, StreamsTheBodyToOnBodyInsteadOfKeepingIt) {
  AnswerServer server(std::nullopt, 200, "line 1\nline 2\n");
  ClientRequest request = To(server.url());
  std::string streamed;
  request.on_body = [&streamed](std::string_view piece) {
    streamed += piece;
    return true;
  };

  auto response = Client().Send(request);

  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(streamed, "line 1\nline 2\n");
  EXPECT_EQ(response->body, "");
}

TEST(HttpClientTest, AResponseOverTheLimitFails) {
  AnswerServer server(std::nullopt, 200, std::string(1000, 'x'));
  ClientRequest request = To(server.url());
  request.max_response_bytes = 999;

  auto response = Client().Send(request);

  EXPECT_EQ(response.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(response.status().message(), HasSubstr("larger than 999 bytes"));
}

TEST(HttpClientTest, AConnectionRefusedIsUnavailable) {
  // Port 1 on loopback: nothing listens there.
  auto response = Client().Send(To("http://127.0.0.1:1/"));

  EXPECT_EQ(response.status(), Unavailable("connection refused"));
}

TEST(HttpClientTest, OtherSchemesThanHttpAndHttpsAreRefused) {
  auto response = Client().Send(To("file:///etc/passwd"));

  EXPECT_EQ(response.status().code(), StatusCode::kInvalidArgument);
}

// A server that accepts connections (the kernel does, from its backlog) but never answers.
class SilentServer {
 public:
  SilentServer() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {}
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

TEST(HttpClientTest, NoAnswerWithinTheTimeoutIsDeadlineExceeded) {
  SilentServer server;
  ClientRequest request = To(server.url());
  request.timeout = std::chrono::milliseconds(200);

  auto response = Client().Send(request);

  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(HttpClientTest, StoppedEndsTheWaitWithCancelled) {
  SilentServer server;
  ClientRequest request = To(server.url());
  request.timeout = std::chrono::seconds(30);
  request.stopped = [] { return true; };

  auto started = std::chrono::steady_clock::now();
  auto response = Client().Send(request);

  EXPECT_EQ(response.status(), Cancelled("stopped"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

class HttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = testing::MakeTestCertificates(::testing::TempDir() + "/http_client_test_tls");
    ASSERT_TRUE(made) << "openssl could not make the test certificates";
    certificates_ = *made;
  }
  testing::TestCertificates certificates_;
};

TEST_F(HttpsTest, TrustsAServerWhoseCertificateChainsToTheGivenCa) {
  AnswerServer server(certificates_, 200, R"({"status":"UP"})");
  ClientRequest request = To(server.url() + "/health");
  request.ca_file = certificates_.ca;

  auto response = Client().Send(request);

  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, R"({"status":"UP"})");
  EXPECT_EQ(server.requests(), 1);
}

TEST_F(HttpsTest, RefusesAServerSignedByAnotherCa) {
  AnswerServer server(certificates_, 200, "{}");
  ClientRequest request = To(server.url() + "/health");
  request.ca_file = certificates_.other_ca;

  auto response = Client().Send(request);

  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(),
              ::testing::StartsWith("TLS: the server's certificate is not trusted"));
  EXPECT_EQ(server.requests(), 0);
}

TEST_F(HttpsTest, RefusesAPrivateCaWhenOnlyTheSystemStoreIsTrusted) {
  AnswerServer server(certificates_, 200, "{}");

  auto response = Client().Send(To(server.url() + "/health"));

  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("not trusted"));
}

TEST_F(HttpsTest, AMissingCaFileIsNamed) {
  AnswerServer server(certificates_, 200, "{}");
  ClientRequest request = To(server.url() + "/health");
  request.ca_file = "/nonexistent/ca.pem";

  auto response = Client().Send(request);

  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("/nonexistent/ca.pem"));
}

// webhook/sender_test.cc checks the common cases through webhook/sender.h's UrlHost.
TEST(UrlHostTest, TakesAnyPortAndCaseAndNeedsAScheme) {
  EXPECT_EQ(UrlHost("HTTPS://[FE80::1]:8443"), "fe80::1");
  EXPECT_EQ(UrlHost("http://a.b.c"), "a.b.c");
  EXPECT_EQ(UrlHost("example.com/path"), "");
  EXPECT_EQ(UrlHost(""), "");
}

}  // namespace
}  // namespace baton::http
