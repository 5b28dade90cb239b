#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

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

// Two uses in one scope: each needs its own temporary.
Result<int> QuarterOf(int n) {
  BATON_ASSIGN_OR_RETURN(int half, Half(n));
  BATON_ASSIGN_OR_RETURN(auto quarter, Half(half));
  return quarter;
}

TEST(AssignOrReturnTest, AssignsTheValueToADeclaration) {
  Result<int> r = QuarterOf(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
}

TEST(AssignOrReturnTest, ReturnsTheErrorOfTheFirstFailingCall) {
  EXPECT_EQ(QuarterOf(3).status(), InvalidArgument("odd"));  // the first Half fails
  EXPECT_EQ(QuarterOf(6).status(), InvalidArgument("odd"));  // the second one fails
}

TEST(AssignOrReturnTest, AssignsToAnExistingVariable) {
  auto twice = [](int n) -> Result<int> {
    int value = -1;
    BATON_ASSIGN_OR_RETURN(value, Half(n));
    BATON_ASSIGN_OR_RETURN(value, Half(value));
    return value;
  };
  EXPECT_EQ(*twice(4), 1);
  EXPECT_FALSE(twice(2).ok());
}

TEST(AssignOrReturnTest, ReturnsTheErrorAsAStatusFromAStatusFunction) {
  int seen = 0;
  auto store = [&](int n) -> Status {
    BATON_ASSIGN_OR_RETURN(seen, Half(n));
    return Status::Ok();
  };
  EXPECT_TRUE(store(10).ok());
  EXPECT_EQ(seen, 5);
  EXPECT_EQ(store(7), InvalidArgument("odd"));
  EXPECT_EQ(seen, 5);  // not assigned on error
}

TEST(AssignOrReturnTest, MovesTheValueOut) {
  auto make = []() -> Result<std::unique_ptr<int>> { return std::make_unique<int>(7); };
  auto take = [&]() -> Result<int> {
    BATON_ASSIGN_OR_RETURN(std::unique_ptr<int> p, make());  // move-only: no copy
    return *p;
  };
  EXPECT_EQ(*take(), 7);
}

TEST(AssignOrReturnTest, MapsTheErrorThroughOnError) {
  auto describe = [](const Status& s) { return "error: " + s.message(); };
  auto render = [&](int n) -> std::string {
    BATON_ASSIGN_OR_RETURN(int half, Half(n), describe);
    return std::to_string(half);
  };
  EXPECT_EQ(render(4), "2");
  EXPECT_EQ(render(5), "error: odd");
}

TEST(AssignOrReturnTest, EvaluatesTheExpressionOnce) {
  int calls = 0;
  auto counted = [&]() -> Result<int> {
    ++calls;
    return 1;
  };
  auto use = [&]() -> Result<int> {
    BATON_ASSIGN_OR_RETURN(int v, counted());
    return v;
  };
  EXPECT_EQ(*use(), 1);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace baton
