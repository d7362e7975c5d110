// StopStringTrimmer against the obvious reference: the whole text cut at the stop string
// completed first.
#include "lib/openai/stop_string_trimmer.h"

#include <gtest/gtest.h>

#include <random>

namespace yoco {
namespace {

TEST(StopStringTrimmerTest, HoldsBackAPossibleStopAndCutsBeforeIt) {
  StopStringTrimmer trimmer({"END"});
  EXPECT_EQ(trimmer.Add("abc E"), "abc ");
  EXPECT_EQ(trimmer.Add("N"), "");
  EXPECT_EQ(trimmer.Add("x"), "ENx");  // not a stop after all
  EXPECT_EQ(trimmer.Add("yE"), "y");
  EXPECT_EQ(trimmer.Add("ND and more"), "");
  EXPECT_TRUE(trimmer.stopped());
  EXPECT_EQ(trimmer.Add("later"), "");
  EXPECT_EQ(trimmer.Flush(), "");
}

TEST(StopStringTrimmerTest, FlushGivesTheHeldTailWhenNoStopCame) {
  StopStringTrimmer trimmer({"\n\n"});
  EXPECT_EQ(trimmer.Add("line\n"), "line");
  EXPECT_EQ(trimmer.Flush(), "\n");
  EXPECT_FALSE(trimmer.stopped());
}

TEST(StopStringTrimmerTest, MatchesTheWholeTextReferenceOnRandomPieces) {
  std::mt19937 rng(7);
  const std::string alphabet = "abAB";
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    const int n_stops = 1 + static_cast<int>(rng() % 3);
    for (int s = 0; s < n_stops; ++s) {
      std::string stop;
      const int len = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < len; ++i) stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    // Reference: the shortest prefix of the text that contains a stop string ends with one;
    // the text is cut where the longest such stop starts.
    size_t cut = std::string::npos;
    for (size_t end = 1; end <= text.size() && cut == std::string::npos; ++end) {
      for (const std::string& stop : stops) {
        if (stop.size() <= end && text.compare(end - stop.size(), stop.size(), stop) == 0) {
          cut = std::min(cut, end - stop.size());
        }
      }
    }
    const std::string want = text.substr(0, cut);

    StopStringTrimmer trimmer(stops);
    std::string got;
    for (size_t pos = 0; pos < text.size();) {
      const size_t piece = 1 + rng() % 5;
      got += trimmer.Add(text.substr(pos, piece));
      pos += piece;
    }
    got += trimmer.Flush();
    ASSERT_EQ(got, want) << "text " << text << " stops " << testing::PrintToString(stops);
    EXPECT_EQ(trimmer.stopped(), cut != std::string::npos);
  }
}

}  // namespace
}  // namespace yoco
