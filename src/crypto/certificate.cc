#include "crypto/certificate.h"

#include <fmt/format.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>

namespace baton::crypto {
namespace {

// "2026-12-06 07:54:31 UTC"
std::string Format(const ASN1_TIME* when) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(when, &tm) != 1) return "an unreadable date";
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

}  // namespace

Status CheckCertificateFile(const std::string& path) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(path.c_str(), "r"), BIO_free);
  if (!bio) return InvalidArgument(fmt::format("{} cannot be read", path));
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free);
  if (!cert) return InvalidArgument(fmt::format("{} holds no PEM certificate", path));
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    return FailedPrecondition(fmt::format("the certificate in {} expired on {}", path,
                                          Format(X509_get0_notAfter(cert.get()))));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert.get())) > 0) {
    return FailedPrecondition(fmt::format("the certificate in {} is not valid before {}", path,
                                          Format(X509_get0_notBefore(cert.get()))));
  }
  return Status::Ok();
}

}  // namespace baton::crypto
