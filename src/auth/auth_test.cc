#include "auth/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "datastore/sqlite/sqlite_datastore.h"

namespace baton::auth {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The lowest cost bcrypt allows: these tests check behaviour, not strength.
constexpr int kCost = 4;

TEST(PasswordTest, AHashIsBcryptWithAFreshSaltAndVerifiesOnlyItsPassword) {
  auto a = HashPassword("correct horse", kCost);
  auto b = HashPassword("correct horse", kCost);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_THAT(*a, StartsWith("$2b$04$"));
  EXPECT_NE(*a, *b);  // salted
  EXPECT_EQ(a->find("correct horse"), std::string::npos);
  EXPECT_TRUE(VerifyPassword("correct horse", *a));
  EXPECT_TRUE(VerifyPassword("correct horse", *b));
  EXPECT_FALSE(VerifyPassword("correct horsf", *a));
  EXPECT_FALSE(VerifyPassword("", *a));
  EXPECT_FALSE(VerifyPassword("correct horse", "plain text"));
}

TEST(PasswordTest, EmptyOverlongAndNulPasswordsAreRefused) {
  EXPECT_THAT(HashPassword("", kCost).status().message(), HasSubstr("must not be empty"));
  EXPECT_THAT(HashPassword(std::string(73, 'x'), kCost).status().message(),
              HasSubstr("the limit is 72"));
  EXPECT_THAT(HashPassword(std::string("a\0b", 3), kCost).status().message(), HasSubstr("NUL"));
}

TEST(ApiKeyTest, AKeyIs256RandomBitsKeptAsItsSha256) {
  auto a = MakeApiKey();
  auto b = MakeApiKey();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_THAT(a->key, StartsWith("baton_"));
  EXPECT_EQ(a->key.size(), 6u + 64u);
  EXPECT_NE(a->key, b->key);
  EXPECT_EQ(a->hash, Sha256Hex(a->key));
  EXPECT_EQ(a->hash.size(), 64u);
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AuthorizationTest, ReadsBasicAndBearerCredentials) {
  // "ann:s3cr:et" — a password may hold colons.
  Credentials basic = ParseAuthorization("Basic YW5uOnMzY3I6ZXQ=");
  EXPECT_EQ(basic.kind, Credentials::Kind::kBasic);
  EXPECT_EQ(basic.username, "ann");
  EXPECT_EQ(basic.secret, "s3cr:et");
  Credentials lower = ParseAuthorization("basic YW5uOnB3");  // ann:pw, no padding
  EXPECT_EQ(lower.kind, Credentials::Kind::kBasic);
  EXPECT_EQ(lower.secret, "pw");
  Credentials bearer = ParseAuthorization("Bearer baton_abc ");
  EXPECT_EQ(bearer.kind, Credentials::Kind::kBearer);
  EXPECT_EQ(bearer.secret, "baton_abc");
  EXPECT_EQ(ParseAuthorization("").kind, Credentials::Kind::kNone);
  EXPECT_EQ(ParseAuthorization("Basic !!!!").kind, Credentials::Kind::kMalformed);
  EXPECT_EQ(ParseAuthorization("Basic YW5u").kind, Credentials::Kind::kMalformed);  // no colon
  EXPECT_EQ(ParseAuthorization("Digest x").kind, Credentials::Kind::kMalformed);
  EXPECT_EQ(ParseAuthorization("Bearer ").kind, Credentials::Kind::kMalformed);
}

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok());
    datastore_ = std::move(*ds);
    UserRecord ann{.id = NewId(),
                   .username = "ann",
                   .name = "Ann",
                   .password_hash = *HashPassword("pw", kCost),
                   .roles = {"ops"},
                   .created_at = Now()};
    ASSERT_TRUE(datastore_->CreateUser(ann).ok());
  }
  Credentials Basic(std::string user, std::string password) {
    return {Credentials::Kind::kBasic, std::move(user), std::move(password)};
  }
  std::unique_ptr<Datastore> datastore_;
};

TEST_F(AuthenticatorTest, APasswordAuthenticatesItsUserWithTheirRoles) {
  Authenticator auth(*datastore_);
  auto who = auth.Authenticate(Basic("ann", "pw"));
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->username, "ann");
  EXPECT_EQ(who->roles, std::vector<std::string>{"ops"});
  // Again, from the cache of verified passwords: the same answer.
  EXPECT_TRUE(auth.Authenticate(Basic("ann", "pw")).ok());
  EXPECT_EQ(auth.Authenticate(Basic("ann", "wrong")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(auth.Authenticate(Basic("bob", "pw")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(auth.Authenticate({}).status().code(), StatusCode::kNotFound);
}

TEST_F(AuthenticatorTest, AnApiKeyActsAsItsUserUntilRevoked) {
  Authenticator auth(*datastore_);
  auto key = MakeApiKey();
  ASSERT_TRUE(key.ok());
  ApiKeyRecord record{
      .id = NewId(), .username = "ann", .name = "ci", .key_hash = key->hash, .created_at = Now()};
  ASSERT_TRUE(datastore_->CreateApiKey(record).ok());
  Credentials bearer{Credentials::Kind::kBearer, "", key->key};
  auto who = auth.Authenticate(bearer);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->username, "ann");
  EXPECT_EQ(auth.Authenticate({Credentials::Kind::kBearer, "", key->key + "0"}).status().code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(datastore_->RevokeApiKey(record.id, Now()).ok());
  auto revoked = auth.Authenticate(bearer);
  EXPECT_EQ(revoked.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(revoked.status().message(), HasSubstr("revoked"));
}

}  // namespace
}  // namespace baton::auth
