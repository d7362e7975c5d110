// The C++ BPE against js-tiktoken, an independent implementation, on cl100k_base with YOCO's
// special tokens: same pattern, same ranks, same ids (+4) for every corpus string, and
// decoding gives the text back (up to the reference's 100276 collision).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "lib/text/tiktoken_bpe.h"
#include "nlohmann/json.hpp"

namespace yoco {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JsTiktokenTest, Cl100kEncodingsMatchTokenForToken) {
  const std::string dir = YOCO_JS_REFERENCE_DIR;
  EXPECT_EQ(ReadFile(dir + "/cl100k_pattern.txt"), kCl100kPattern)
      << "the built-in cl100k pattern differs from js-tiktoken's";
  auto bpe = TiktokenBpe::Load(dir + "/cl100k_base.tiktoken", ReadFile(dir + "/cl100k_pattern.txt"),
                               YocoSpecialTokens());
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  const auto expected = nlohmann::json::parse(ReadFile(dir + "/expected.json"));
  ASSERT_GT(expected.size(), 20u);
  for (const auto& item : expected) {
    const std::string text = item["text"].get<std::string>();
    std::vector<int32_t> want;
    for (int32_t id : item["ids"].get<std::vector<int32_t>>())
      want.push_back(id + kTokenizerIdOffset);
    auto got = (*bpe)->Encode(text);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << "text: " << text;
    // Id 100276 is both <|endofprompt|> and <jupyter_code>; decoding gives the latter.
    std::string round_trip = text;
    for (size_t at; (at = round_trip.find("<|endofprompt|>")) != std::string::npos;) {
      round_trip.replace(at, 15, "<jupyter_code>");
    }
    EXPECT_EQ(*(*bpe)->Decode(*got), round_trip);
  }
}

}  // namespace
}  // namespace yoco
