#include "crypto/certificate.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace baton::crypto {
namespace {

class CertificateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("certificate-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A self-signed certificate valid from `from` to `to` seconds from now, as PEM in NAME.
  std::string Write(const std::string& name, long from, long to) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    X509_gmtime_adj(X509_getm_notBefore(cert), from);
    X509_gmtime_adj(X509_getm_notAfter(cert), to);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("baton"), -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(cert));
    X509_set_pubkey(cert, key);
    X509_sign(cert, key, EVP_sha256());
    const std::string path = (dir_ / name).string();
    FILE* f = std::fopen(path.c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
    X509_free(cert);
    EVP_PKEY_free(key);
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(CertificateTest, ACertificateValidNowPasses) {
  EXPECT_TRUE(CheckCertificateFile(Write("valid.pem", -60, 3600)).ok());
}

TEST_F(CertificateTest, AnExpiredCertificateIsRefusedWithItsPathAndDate) {
  const std::string path = Write("expired.pem", -7200, -3600);
  Status s = CheckCertificateFile(path);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("the certificate in " + path + " expired on 20"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(" UTC"), std::string::npos) << s.message();
}

TEST_F(CertificateTest, ACertificateNotValidYetIsRefused) {
  Status s = CheckCertificateFile(Write("later.pem", 3600, 7200));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("is not valid before"), std::string::npos) << s.message();
}

TEST_F(CertificateTest, AMissingFileOrOneWithoutACertificateIsInvalid) {
  EXPECT_EQ(CheckCertificateFile((dir_ / "none.pem").string()).code(),
            StatusCode::kInvalidArgument);
  std::ofstream((dir_ / "text.pem").string()) << "not a certificate\n";
  Status s = CheckCertificateFile((dir_ / "text.pem").string());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("holds no PEM certificate"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace baton::crypto
