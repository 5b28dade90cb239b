#include "crypto/aead.h"

#include <gtest/gtest.h>

#include <cstring>

namespace baton::crypto {
namespace {

std::string Unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

Key KeyOf(std::string_view hex) {
  std::string bytes = Unhex(hex);
  Key key{};
  std::memcpy(key.data(), bytes.data(), key.size());
  return key;
}

struct Vector {
  const char* key;
  const char* nonce;
  const char* aad;
  const char* plaintext;
  const char* ciphertext_and_tag;
};

// The AES-256 test cases 13, 14 and 16 of McGrew and Viega's GCM specification (the
// vectors NIST's GCM validation starts from).
constexpr Vector kVectors[] = {
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
     "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
     "", "00000000000000000000000000000000",
     "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919"},
    {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

TEST(AeadTest, SealMatchesTheGcmSpecificationVectors) {
  for (const Vector& v : kVectors) {
    Result<std::string> sealed =
        Seal(KeyOf(v.key), Unhex(v.nonce), Unhex(v.aad), Unhex(v.plaintext));
    ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
    EXPECT_EQ(*sealed, Unhex(v.ciphertext_and_tag)) << v.ciphertext_and_tag;
  }
}

TEST(AeadTest, OpenRecoversTheVectorsPlaintext) {
  for (const Vector& v : kVectors) {
    Result<std::string> plain =
        Open(KeyOf(v.key), Unhex(v.nonce), Unhex(v.aad), Unhex(v.ciphertext_and_tag));
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_EQ(*plain, Unhex(v.plaintext));
  }
}

TEST(AeadTest, OpenRefusesAnyChangedByteOfCiphertextTagNonceOrAad) {
  const Vector& v = kVectors[2];
  const Key key = KeyOf(v.key);
  const std::string nonce = Unhex(v.nonce), aad = Unhex(v.aad);
  const std::string sealed = Unhex(v.ciphertext_and_tag);
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    std::string changed = sealed;
    changed[i] = static_cast<char>(changed[i] ^ 0x01);
    Result<std::string> plain = Open(key, nonce, aad, changed);
    ASSERT_FALSE(plain.ok()) << "byte " << i;
    EXPECT_EQ(plain.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(plain.status().message().find("authentication failed"), std::string::npos);
  }
  std::string other_nonce = nonce;
  other_nonce[0] = static_cast<char>(other_nonce[0] ^ 0x80);
  EXPECT_FALSE(Open(key, other_nonce, aad, sealed).ok());
  EXPECT_FALSE(Open(key, nonce, aad + "x", sealed).ok());
  Key other_key = key;
  other_key[31] ^= 1;
  EXPECT_FALSE(Open(other_key, nonce, aad, sealed).ok());
  EXPECT_FALSE(Open(key, nonce, aad, sealed.substr(0, 15)).ok());  // shorter than a tag
}

TEST(AeadTest, ANonceOfAnotherLengthIsRefused) {
  Result<std::string> sealed = Seal(Key{}, "short", "", "x");
  ASSERT_FALSE(sealed.ok());
  EXPECT_EQ(sealed.status().code(), StatusCode::kInvalidArgument);
}

TEST(AeadTest, Base64RoundTripsEveryLengthAndRefusesOtherText) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    Result<std::string> back = FromBase64(Base64(bytes));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, bytes);
    bytes.push_back(static_cast<char>(n * 37));
  }
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_FALSE(FromBase64("Zm9vY").ok());
  EXPECT_FALSE(FromBase64("Zm9v!!==").ok());
  EXPECT_FALSE(FromBase64("Zm9vYh==").ok());  // "foob" with an unused bit set
}

TEST(AeadTest, Sha256HexMatchesTheKnownDigestOfAbc) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace baton::crypto
