// SentTokens: each token's message (index, text assembled across tokens), the gaps between
// tokens, and where the stream ends, in the order the rules state: a named stop token, EOS when
// asked, a completed stop string, then the length.
#include "services/router/sent_tokens.h"

#include <gtest/gtest.h>

#include "lib/text/byte_tokenizer.h"

namespace yoco {
namespace {

using std::chrono::milliseconds;

class SentTokensTest : public ::testing::Test {
 protected:
  SentTokensTest() {
    call_.max_new_tokens = 8;
    call_.stop_at_eos = true;
  }
  // The byte tokenizer's id of a byte.
  int32_t Byte(unsigned char c) const {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer_.Encode(std::string(1, c));
    EXPECT_TRUE(ids.ok());
    return ids->back();
  }

  CheckedGenerateRequest call_;
  ByteTokenizer tokenizer_;
  const SentTokens::Clock::time_point start_ = SentTokens::Clock::now();
};

TEST_F(SentTokensTest, MessagesCarryIndexTextAndTheGapSinceThePrevious) {
  SentTokens sent(call_, tokenizer_, start_);
  // "é" is two bytes: the first token completes no character, the second both.
  const SentTokens::Sent a = sent.Add(Byte(0xC3), start_ + milliseconds(40));
  const SentTokens::Sent b = sent.Add(Byte(0xA9), start_ + milliseconds(50));
  EXPECT_TRUE(a.first);
  EXPECT_FALSE(b.first);
  EXPECT_EQ(a.message.index(), 0u);
  EXPECT_EQ(b.message.index(), 1u);
  EXPECT_EQ(a.message.text(), "");
  EXPECT_EQ(b.message.text(), "\xC3\xA9");
  EXPECT_DOUBLE_EQ(a.seconds, 0.040);
  EXPECT_NEAR(b.seconds, 0.010, 1e-9);
  EXPECT_EQ(sent.ids(), std::vector<int32_t>({Byte(0xC3), Byte(0xA9)}));
  EXPECT_EQ(sent.still_to_come(), 6u);
}

TEST_F(SentTokensTest, EndsAtAStopTokenEosAStopStringOrTheLength) {
  call_.sampling.stop_token_ids = {Byte('x')};
  call_.stop_strings = {"ab"};
  call_.max_new_tokens = 3;
  {
    SentTokens sent(call_, tokenizer_, start_);
    sent.Add(Byte('x'), start_);
    EXPECT_EQ(sent.EndsAt(Byte('x')), v1::FINISH_REASON_STOP);
  }
  {
    SentTokens sent(call_, tokenizer_, start_);
    sent.Add(kEosId, start_);
    EXPECT_EQ(sent.EndsAt(kEosId), v1::FINISH_REASON_EOS);
  }
  {
    SentTokens sent(call_, tokenizer_, start_);
    sent.Add(Byte('a'), start_);
    EXPECT_EQ(sent.EndsAt(Byte('a')), std::nullopt);
    sent.Add(Byte('b'), start_);
    EXPECT_TRUE(sent.stopped());
    EXPECT_EQ(sent.EndsAt(Byte('b')), v1::FINISH_REASON_STOP);
  }
  {
    SentTokens sent(call_, tokenizer_, start_);
    for (unsigned char c : {'q', 'r', 's'}) sent.Add(Byte(c), start_);
    EXPECT_EQ(sent.EndsAt(Byte('s')), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(sent.still_to_come(), 0u);
  }
  call_.stop_at_eos = false;  // EOS is an ordinary token then
  SentTokens sent(call_, tokenizer_, start_);
  sent.Add(kEosId, start_);
  EXPECT_EQ(sent.EndsAt(kEosId), std::nullopt);
}

}  // namespace
}  // namespace yoco
