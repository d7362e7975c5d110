// The log's two formats, read back: JSON lines parse as JSON with every field (escapes and all),
// text lines stay one line with values that cannot pose as fields; levels below the minimum are
// not written; a rate limit holds lines back and the next line says how many.
#include "lib/log/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace yoco {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void Use(LogFormat format, LogLevel min_level = LogLevel::kInfo) {
    LogSettings settings;
    settings.program = "yoco-test";
    settings.format = format;
    settings.min_level = min_level;
    settings.sink = [this](absl::string_view line) { lines_.emplace_back(line); };
    ConfigureLog(std::move(settings));
  }
  ~LogTest() override { ConfigureLog(LogSettings()); }

  std::vector<std::string> lines_;
};

TEST_F(LogTest, JsonLinesCarryEveryFieldEscaped) {
  Use(LogFormat::kJson);
  const std::string hostile = "a \"quoted\"\nline\\ with \x01 control";
  LogWarning("stalled \"worker\"")
      .With("request_id", "req-1")
      .With("error", hostile)
      .With("tokens", 42)
      .With("bytes", uint64_t{1} << 40)
      .With("ms", 12.5)
      .With("local", true);
  ASSERT_EQ(lines_.size(), 1u);
  ASSERT_EQ(lines_[0].back(), '\n');
  EXPECT_EQ(lines_[0].find('\n'), lines_[0].size() - 1);  // one line
  const nlohmann::json j = nlohmann::json::parse(lines_[0]);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["program"], "yoco-test");
  EXPECT_EQ(j["message"], "stalled \"worker\"");
  EXPECT_EQ(j["request_id"], "req-1");
  EXPECT_EQ(j["error"], hostile);
  EXPECT_EQ(j["tokens"], 42);
  EXPECT_EQ(j["bytes"], uint64_t{1} << 40);
  EXPECT_DOUBLE_EQ(j["ms"].get<double>(), 12.5);
  EXPECT_EQ(j["local"], true);
  const std::string time = j["time"];
  EXPECT_EQ(time.size(), 27u) << time;  // 2026-12-05T12:00:00.123456Z
  EXPECT_EQ(time.back(), 'Z');
}

TEST_F(LogTest, TextLinesQuoteWhatCouldPoseAsAField) {
  Use(LogFormat::kText);
  LogInfo("serving on port 5000").With("tenant", "acme").With("error", "x=1 y=\"2\"\nz");
  ASSERT_EQ(lines_.size(), 1u);
  const std::string& line = lines_[0];
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_NE(line.find(" I yoco-test: serving on port 5000 tenant=acme "), std::string::npos)
      << line;
  EXPECT_NE(line.find(R"(error="x=1 y=\"2\"\nz")"), std::string::npos) << line;
}

TEST_F(LogTest, LinesBelowTheMinimumAreNotWritten) {
  Use(LogFormat::kText, LogLevel::kWarning);
  LogDebug("d");
  LogInfo("i");
  LogWarning("w");
  LogError("e");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_NE(lines_[0].find(" W yoco-test: w"), std::string::npos) << lines_[0];
  EXPECT_NE(lines_[1].find(" E yoco-test: e"), std::string::npos) << lines_[1];
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
}

TEST_F(LogTest, ARateLimitHoldsLinesBackAndTheNextSaysHowMany) {
  Use(LogFormat::kJson);
  LogRateLimit limit(2, absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  uint64_t held = 99;
  EXPECT_TRUE(limit.Allow(&held, t0));
  EXPECT_EQ(held, 0u);
  EXPECT_TRUE(limit.Allow(&held, t0 + absl::Milliseconds(10)));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limit.Allow(&held, t0 + absl::Milliseconds(20 + i)));
  ASSERT_TRUE(limit.Allow(&held, t0 + absl::Seconds(1)));
  EXPECT_EQ(held, 5u);
  LogWarning("refused").HeldBack(held);
  LogWarning("refused").HeldBack(0);
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines_[0])["held_back"], 5);
  EXPECT_FALSE(nlohmann::json::parse(lines_[1]).contains("held_back"));
}

TEST(LogFlagsTest, NamesAreParsedAndBadOnesRefused) {
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogFormat("xml").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ParseLogLevel("loud").status().message().find("debug, info, warning or error"),
            std::string::npos);
}

}  // namespace
}  // namespace yoco
