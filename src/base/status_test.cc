#include "base/status.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = NotFound("job 42 not found");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: job 42 not found");
}

TEST(StatusTest, CodeNamesAreTheWireNames) {
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
}

Result<int> Half(int n) {
  if (n % 2 != 0) return InvalidArgument("odd");
  return n / 2;
}

Status UsesReturnIfError(int n) {
  BATON_RETURN_IF_ERROR(Half(n).status());
  return Status::Ok();
}

TEST(ResultTest, HoldsValueOrError) {
  auto r = Half(4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  auto e = Half(3);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "odd");
  EXPECT_TRUE(UsesReturnIfError(2).ok());
  EXPECT_EQ(UsesReturnIfError(3).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton
