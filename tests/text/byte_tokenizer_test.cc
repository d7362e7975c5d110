// Byte tokenizer: every byte string round-trips, ids are bytes + 4, reserved ids vanish on
// decode, out-of-range ids are refused.
#include "lib/text/byte_tokenizer.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

TEST(ByteTokenizerTest, RoundTripsAnyBytes) {
  ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  for (const std::string& text :
       {std::string("hello"), std::string("grüße 👋"), all, std::string()}) {
    auto ids = tok.Encode(text);
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(ids->size(), text.size());
    for (size_t i = 0; i < text.size(); ++i)
      EXPECT_EQ((*ids)[i], static_cast<unsigned char>(text[i]) + 4);
    EXPECT_EQ(*tok.Decode(*ids), text);
  }
  EXPECT_EQ(tok.id_limit(), 260);
}

TEST(ByteTokenizerTest, DecodeDropsReservedAndRefusesUnknown) {
  ByteTokenizer tok;
  EXPECT_EQ(*tok.Decode({0, 'h' + 4, 1, 'i' + 4, 2, 3}), "hi");
  EXPECT_EQ(tok.Decode({260}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tok.Decode({-5}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace yoco
