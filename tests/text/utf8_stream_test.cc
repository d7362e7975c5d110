// AppendValidUtf8: valid text passes through however it is split into tokens; an incomplete
// character waits for the next token; every byte that cannot start or continue a valid
// character becomes one U+FFFD.
#include "lib/text/utf8_stream.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

std::string All(const std::string& bytes) {
  size_t pos = 0;
  std::string out;
  AppendValidUtf8(bytes, &pos, &out);
  return out;
}

TEST(Utf8StreamTest, ValidTextPassesThroughByteByByte) {
  const std::string text =
      "plain, caf\xC3\xA9, \xE2\x82\xAC 5, \xF0\x9F\x98\x80, \xE4\xB8\xAD\xE6\x96\x87";
  std::string bytes, out;
  size_t pos = 0;
  for (char c : text) {
    bytes.push_back(c);
    AppendValidUtf8(bytes, &pos, &out);
    EXPECT_EQ(out, text.substr(0, out.size()));  // never a partial character
  }
  EXPECT_EQ(out, text);
  EXPECT_EQ(pos, text.size());
}

TEST(Utf8StreamTest, AnIncompleteCharacterWaitsForTheNextToken) {
  std::string bytes = "a\xE2\x82";
  size_t pos = 0;
  std::string out;
  AppendValidUtf8(bytes, &pos, &out);
  EXPECT_EQ(out, "a");
  EXPECT_EQ(pos, 1u);
  bytes += "\xAC";
  AppendValidUtf8(bytes, &pos, &out);
  EXPECT_EQ(out, "a\xE2\x82\xAC");
}

TEST(Utf8StreamTest, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(All("\xFF"), kReplacement);
  EXPECT_EQ(All("\xC0\x80"), kReplacement + kReplacement);                     // overlong
  EXPECT_EQ(All("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(All("\xE2\x82"
                "A"),
            kReplacement + kReplacement + "A");             // cut short
  EXPECT_EQ(All("\xF5\x80"), kReplacement + kReplacement);  // beyond U+10FFFF
  EXPECT_EQ(All("\x80"
                "b"),
            kReplacement + "b");  // a lone continuation byte
}

TEST(ToValidUtf8Test, ReplacesInvalidAndTruncatedBytesAndKeepsValidText) {
  EXPECT_EQ(ToValidUtf8("plain \xC3\xA9t\xC3\xA9"), "plain \xC3\xA9t\xC3\xA9");
  EXPECT_EQ(ToValidUtf8("a\xFFz"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(ToValidUtf8("end\xE2\x82"), "end\xEF\xBF\xBD\xEF\xBF\xBD");  // cut-off euro sign
  EXPECT_EQ(ToValidUtf8(""), "");
  // Whatever the input, the output is valid UTF-8: it passes through unchanged a second time.
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  const std::string once = ToValidUtf8(all);
  EXPECT_EQ(ToValidUtf8(once), once);
}

}  // namespace
}  // namespace yoco
