#include "crypto/keyring.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace baton::crypto {
namespace {

Key Fresh() {
  Result<Key> key = GenerateKey();
  EXPECT_TRUE(key.ok());
  return *key;
}

Keyring Ring(std::vector<Key> keys) {
  Result<Keyring> ring = Keyring::Make(std::move(keys));
  EXPECT_TRUE(ring.ok()) << ring.status().ToString();
  return *ring;
}

TEST(KeyringTest, ParseKeyTakesHexAndBase64AndRefusesOtherLengthsWithoutQuotingThem) {
  const std::string hex(64, 'a');
  Result<Key> from_hex = ParseKey(hex);
  ASSERT_TRUE(from_hex.ok());
  EXPECT_EQ((*from_hex)[0], 0xaa);
  Result<Key> from_base64 = ParseKey(EncodeKey(*from_hex));
  ASSERT_TRUE(from_base64.ok());
  EXPECT_EQ(*from_base64, *from_hex);
  for (const char* bad : {"", "c2VjcmV0LXRvby1zaG9ydA==", "zz", "not a key at all, hunter2"}) {
    Result<Key> key = ParseKey(bad);
    ASSERT_FALSE(key.ok()) << bad;
    if (*bad != '\0') {
      EXPECT_EQ(key.status().message().find(bad), std::string::npos);
    }
  }
}

TEST(KeyringTest, KeyIdIsTheFirstEightHexDigitsOfTheKeysSha256) {
  Key zero{};
  // SHA-256 of 32 zero bytes: 66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925
  EXPECT_EQ(KeyId(zero), "66687aad");
}

TEST(KeyringTest, EncryptWritesAnEnvelopeUnderThePrimaryKeyThatDecryptsBack) {
  const Key key = Fresh();
  Keyring ring = Ring({key});
  Result<std::string> a = ring.Encrypt("hunter2");
  Result<std::string> b = ring.Encrypt("hunter2");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->starts_with("baton:aes256gcm:" + KeyId(key) + ":")) << *a;
  EXPECT_TRUE(IsEnvelope(*a));
  EXPECT_TRUE(ring.IsCurrent(*a));
  EXPECT_EQ(a->find("hunter2"), std::string::npos);
  EXPECT_NE(*a, *b);  // a fresh nonce each time
  Result<std::string> plain = ring.Decrypt(*a);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(*plain, "hunter2");
  Result<std::string> empty = ring.Encrypt("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*ring.Decrypt(*empty), "");
}

TEST(KeyringTest, AnOlderKeyDecryptsButOnlyThePrimaryEncrypts) {
  const Key old_key = Fresh(), new_key = Fresh();
  Result<std::string> old_value = Ring({old_key}).Encrypt("s3cret");
  ASSERT_TRUE(old_value.ok());
  Keyring rotated = Ring({new_key, old_key});
  EXPECT_FALSE(rotated.IsCurrent(*old_value));
  EXPECT_EQ(*rotated.Decrypt(*old_value), "s3cret");
  Result<std::string> new_value = rotated.Encrypt("s3cret");
  EXPECT_TRUE(rotated.IsCurrent(*new_value));
  EXPECT_EQ(EnvelopeKeyId(*new_value), KeyId(new_key));
}

TEST(KeyringTest, AnEnvelopeOfAKeyNotConfiguredIsAClearErrorNamingTheKeyId) {
  const Key key = Fresh();
  Result<std::string> value = Ring({key}).Encrypt("s3cret");
  Result<std::string> plain = Ring({Fresh()}).Decrypt(*value);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plain.status().message().find(KeyId(key)), std::string::npos);
  EXPECT_NE(plain.status().message().find("not configured"), std::string::npos);
}

TEST(KeyringTest, ATamperedEnvelopeFailsAuthenticationAndNeverYieldsText) {
  Keyring ring = Ring({Fresh()});
  Result<std::string> value = ring.Encrypt("a secret long enough to flip bits in");
  ASSERT_TRUE(value.ok());
  const std::size_t body = value->rfind(':') + 1;
  for (std::size_t i = body; i < value->size(); ++i) {
    std::string changed = *value;
    changed[i] = changed[i] == 'A' ? 'B' : 'A';
    if (changed == *value) continue;
    Result<std::string> plain = ring.Decrypt(changed);
    EXPECT_FALSE(plain.ok()) << "char " << i;
  }
  // The key id is authenticated too: another configured key's id in the header fails.
  const Key second = Fresh();
  Keyring both = Ring({Fresh(), second});
  Result<std::string> under_first = both.Encrypt("x");
  std::string relabelled = *under_first;
  relabelled.replace(kEnvelopePrefix.size(), 8, KeyId(second));
  EXPECT_FALSE(both.Decrypt(relabelled).ok());
  EXPECT_FALSE(ring.Decrypt("baton:aes256gcm:zz:").ok());
  EXPECT_EQ(ring.Decrypt("plain text").status().code(), StatusCode::kInvalidArgument);
}

TEST(KeyringTest, MakeRefusesNoKeysAndARepeatedKey) {
  EXPECT_FALSE(Keyring::Make({}).ok());
  const Key key = Fresh();
  EXPECT_FALSE(Keyring::Make({key, key}).ok());
}

class KeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton-keyfile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(KeyFileTest, CreateKeyFileWritesOneKeyReadableByItsOwnerOnlyAndNeverOverwrites) {
  const std::string path = (dir_ / "secrets.key").string();
  ASSERT_TRUE(CreateKeyFile(path).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  Result<std::vector<Key>> keys = ReadKeyFile(path);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->size(), 1u);
  Status again = CreateKeyFile(path);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  Result<std::vector<Key>> same = ReadKeyFile(path);
  EXPECT_EQ((*same)[0], (*keys)[0]);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);  // no temporary left behind
}

TEST_F(KeyFileTest, CreateKeyFileSyncsItsDirectoryAfterLinkingTheKey) {
  const std::string path = (dir_ / "secrets.key").string();
  std::vector<std::string> synced;
  bool linked_when_synced = false;
  auto record = [&](const std::string& dir) {
    synced.push_back(dir);
    linked_when_synced = std::filesystem::exists(path);
    return SyncDirectory(dir);
  };
  ASSERT_TRUE(CreateKeyFile(path, record).ok());
  ASSERT_EQ(synced.size(), 1u);
  EXPECT_EQ(std::filesystem::path(synced[0]), dir_);
  EXPECT_TRUE(linked_when_synced);
}

TEST_F(KeyFileTest, CreateKeyFileFailsWhenItsDirectoryCannotBeSynced) {
  const std::string path = (dir_ / "secrets.key").string();
  Status created =
      CreateKeyFile(path, [](const std::string&) { return FailedPrecondition("disk gone"); });
  EXPECT_EQ(created.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(created.message().find("disk gone"), std::string::npos) << created.message();
}

TEST_F(KeyFileTest, ReadKeyFileTakesThePrimaryFirstSkipsCommentsAndNamesABadLine) {
  const Key a = Fresh(), b = Fresh();
  const std::string path = (dir_ / "keys").string();
  {
    std::ofstream out(path);
    out << "# new primary\n" << EncodeKey(a) << "\n\n  # old\n" << EncodeKey(b) << "\n";
  }
  Result<std::vector<Key>> keys = ReadKeyFile(path);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0], a);
  EXPECT_EQ((*keys)[1], b);
  {
    std::ofstream out(path);
    out << EncodeKey(a) << "\nhunter2\n";
  }
  Result<std::vector<Key>> bad = ReadKeyFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos);
  EXPECT_EQ(bad.status().message().find("hunter2"), std::string::npos);
  EXPECT_FALSE(ReadKeyFile((dir_ / "missing").string()).ok());
  { std::ofstream out(path, std::ios::trunc); }
  EXPECT_FALSE(ReadKeyFile(path).ok());
}

}  // namespace
}  // namespace baton::crypto
