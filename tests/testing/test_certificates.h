// Certificates made by a test with the openssl command: a private CA, a certificate for
// 127.0.0.1 and localhost signed by it, and an unrelated CA (what a client that trusts the
// wrong CA has).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace baton::testing {

struct TestCertificates {
  std::string ca;        // the private CA's certificate (PEM): what --cacert is given
  std::string cert;      // the server's certificate, signed by `ca`
  std::string key;       // its key
  std::string other_ca;  // a CA that signed nothing here: the wrong one
};

// Makes the files with the openssl command in `base` suffixed with this process's id, so
// that tests run as parallel processes (ctest -j) never overwrite each other's CA; nullopt
// when openssl fails.
inline std::optional<TestCertificates> MakeTestCertificates(const std::string& base) {
  const std::string dir = base + "-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  TestCertificates c{dir + "/ca.pem", dir + "/server.pem", dir + "/server.key",
                     dir + "/other-ca.pem"};
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd '" + dir + "';" + "openssl req -x509 " + ec +
      " -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca" +
      " -addext basicConstraints=critical,CA:TRUE;" + "openssl req -x509 " + ec +
      " -keyout other-ca.key -out other-ca.pem -days 2" +
      " -subj /CN=other-ca -addext basicConstraints=critical,CA:TRUE;" + "openssl req " + ec +
      " -keyout server.key -out server.csr -subj /CN=localhost;" +
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext;" +
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial" +
      " -out server.pem -days 2 -extfile server.ext";
  const std::string command = "(" + script + ") >'" + dir + "/openssl.log' 2>&1";
  if (std::system(command.c_str()) != 0) return std::nullopt;
  return c;
}

}  // namespace baton::testing
