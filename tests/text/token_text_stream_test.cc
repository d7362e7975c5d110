// TokenTextStream and FirstStopString against slow references that keep and search the whole
// text: every split of random byte strings into tokens gives the same text and the same token
// completing the first stop string.
#include "lib/text/token_text_stream.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "lib/text/stop_strings.h"
#include "lib/text/utf8_stream.h"

namespace yoco {
namespace {

TEST(StopStringsTest, FirstToCompleteWinsAndTiesGoToTheLonger) {
  const std::vector<std::string> stops = {"cd", "bcd", "xyz", ""};
  auto m = FirstStopString("abcdxyz", 0, stops);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->begin, 1u);  // "bcd" and "cd" both end at 4: the longer
  EXPECT_EQ(m->end, 4u);
  m = FirstStopString("abxyzcd", 0, stops);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->begin, 2u);                                         // "xyz" completes before "cd"
  EXPECT_FALSE(FirstStopString("abcdef", 4, {"cd"}).has_value());  // ended before `searched`
  m = FirstStopString("abcdef", 3, {"cd"});                        // straddles it
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->begin, 2u);
  EXPECT_FALSE(FirstStopString("abc", 0, {""}).has_value());
}

TEST(TokenTextStreamTest, CharactersSpanningTokensAndUnspellableTokens) {
  TokenTextStream s;
  EXPECT_EQ(s.Add(std::string("a\xC3")), "a");  // the start of "é"
  EXPECT_EQ(s.Add(std::string("\xA9")), "\xC3\xA9");
  EXPECT_EQ(s.Add(absl::NotFoundError("id out of range")), "\xEF\xBF\xBD");
  EXPECT_EQ(s.Add(std::string("\xFF")), "\xEF\xBF\xBD");  // never valid
  EXPECT_FALSE(s.stopped());
}

// Random tokens over a small alphabet with multi-byte characters, stop strings that straddle
// tokens: the text equals the valid UTF-8 of the whole byte string (AppendValidUtf8 at once),
// and the stream stops at exactly the token after which a search of the whole text first finds a
// stop string.
TEST(TokenTextStreamTest, MatchesSearchingTheWholeText) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "b", "c", " ", "\xC3\xA9", "\xE2\x82\xAC"};
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::string> stops;
    for (int i = 0, n = 1 + rng() % 3; i < n; ++i) {
      std::string stop;
      for (int j = 0, len = 1 + rng() % 3; j < len; ++j) stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    std::string whole;
    for (int i = 0; i < 40; ++i) whole += alphabet[rng() % alphabet.size()];
    TokenTextStream stream(stops);
    std::string text, bytes;
    int stopped_at = -1, want_stop = -1, token = 0;
    for (size_t pos = 0; pos < whole.size(); ++token) {
      const size_t len = std::min<size_t>(1 + rng() % 4, whole.size() - pos);
      const std::string piece = whole.substr(pos, len);
      pos += len;
      text += stream.Add(piece);
      if (stream.stopped() && stopped_at < 0) stopped_at = token;
      bytes += piece;
      size_t p = 0;
      std::string valid;
      AppendValidUtf8(bytes, &p, &valid);
      bool found = false;
      for (const std::string& stop : stops) found |= valid.find(stop) != std::string::npos;
      if (found && want_stop < 0) want_stop = token;
    }
    size_t p = 0;
    std::string want;
    AppendValidUtf8(whole, &p, &want);
    EXPECT_EQ(text, want) << trial;
    EXPECT_EQ(stopped_at, want_stop) << trial;
  }
}

}  // namespace
}  // namespace yoco
