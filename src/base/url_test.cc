#include "base/url.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(UrlTest, EncodesAllButUnreservedCharacters) {
  EXPECT_EQ(PercentEncode("a-Z_0.~"), "a-Z_0.~");
  EXPECT_EQ(PercentEncode("/"), "%2F");
  EXPECT_EQ(PercentEncode("a b&c=d"), "a%20b%26c%3Dd");
  EXPECT_EQ(PercentEncode("\xC3\xA9"), "%C3%A9");
}

TEST(UrlTest, DecodesWhatEncodes) {
  EXPECT_EQ(PercentDecode("p%40ss%3Aword"), "p@ss:word");
  EXPECT_EQ(PercentDecode(PercentEncode("any /thing: \xC3\xA9")), "any /thing: \xC3\xA9");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
}

}  // namespace
}  // namespace baton
