#include "base/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace baton::log {
namespace {

TEST(LogTest, AJsonLineCarriesItsTimeLevelMessageAndFields) {
  Configure(Level::kInfo, Format::kJson);
  ::testing::internal::CaptureStderr();
  Info("something happened", {{"job_id", "j1"}});
  std::string out = ::testing::internal::GetCapturedStderr();
  Configure(Level::kInfo, Format::kText);
  ASSERT_FALSE(out.empty());
  nlohmann::json line = nlohmann::json::parse(out.substr(0, out.find('\n')));
  EXPECT_EQ(line["msg"], "something happened");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["job_id"], "j1");
  ASSERT_TRUE(line.contains("time")) << out;
  EXPECT_TRUE(std::regex_match(line["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << line["time"];
}

}  // namespace
}  // namespace baton::log
