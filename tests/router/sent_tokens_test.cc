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

  static v1::GeneratedToken Produced(int32_t id) {
    v1::GeneratedToken token;
    token.set_id(id);
    return token;
  }

  CheckedGenerateRequest call_;
  ByteTokenizer tokenizer_;
  const SentTokens::Clock::time_point start_ = SentTokens::Clock::now();
};

TEST_F(SentTokensTest, MessagesCarryIndexTextAndTheGapSinceThePrevious) {
  SentTokens sent(call_, tokenizer_, start_);
  // "é" is two bytes: the first token completes no character, the second both.
  const SentTokens::Sent a = sent.Add(Produced(Byte(0xC3)), start_ + milliseconds(40));
  const SentTokens::Sent b = sent.Add(Produced(Byte(0xA9)), start_ + milliseconds(50));
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

TEST_F(SentTokensTest, LogprobsPassThroughWithEachTokensOwnBytes) {
  SentTokens sent(call_, tokenizer_, start_);
  v1::GeneratedToken produced = Produced(Byte(0xC3));
  produced.mutable_logprob()->set_id(Byte(0xC3));
  produced.mutable_logprob()->set_logprob(-1.5f);
  for (int32_t id : {Byte('a'), kEosId, Byte(0xC3)}) {
    v1::TokenLogprob* top = produced.add_top_logprobs();
    top->set_id(id);
    top->set_logprob(-0.25f * static_cast<float>(produced.top_logprobs_size()));
  }
  const SentTokens::Sent a = sent.Add(produced, start_);
  EXPECT_EQ(a.message.text(), "");  // half a character: no text yet, but the token has a byte
  EXPECT_EQ(a.message.logprob().id(), Byte(0xC3));
  EXPECT_EQ(a.message.logprob().logprob(), -1.5f);
  EXPECT_EQ(a.message.logprob().token(), "\xC3");
  ASSERT_EQ(a.message.top_logprobs_size(), 3);
  EXPECT_EQ(a.message.top_logprobs(0).token(), "a");
  EXPECT_EQ(a.message.top_logprobs(1).token(), "");  // a special id has no bytes
  EXPECT_EQ(a.message.top_logprobs(2).token(), "\xC3");
  EXPECT_EQ(a.message.top_logprobs(2).logprob(), -0.75f);
  // Without logprobs from the worker, none go out.
  EXPECT_FALSE(sent.Add(Produced(Byte('b')), start_).message.has_logprob());
}

TEST_F(SentTokensTest, EndsAtAStopTokenEosAStopStringOrTheLength) {
  call_.sampling.stop_token_ids = {Byte('x')};
  call_.stop_strings = {"ab"};
  call_.max_new_tokens = 3;
  {
    SentTokens sent(call_, tokenizer_, start_);
    sent.Add(Produced(Byte('x')), start_);
    EXPECT_EQ(sent.EndsAt(Byte('x')), v1::FINISH_REASON_STOP);
  }
  {
    SentTokens sent(call_, tokenizer_, start_);
    sent.Add(Produced(kEosId), start_);
    EXPECT_EQ(sent.EndsAt(kEosId), v1::FINISH_REASON_EOS);
  }
  {
    SentTokens sent(call_, tokenizer_, start_);
    sent.Add(Produced(Byte('a')), start_);
    EXPECT_EQ(sent.EndsAt(Byte('a')), std::nullopt);
    sent.Add(Produced(Byte('b')), start_);
    EXPECT_TRUE(sent.stopped());
    EXPECT_EQ(sent.EndsAt(Byte('b')), v1::FINISH_REASON_STOP);
  }
  {
    SentTokens sent(call_, tokenizer_, start_);
    for (unsigned char c : {'q', 'r', 's'}) sent.Add(Produced(Byte(c)), start_);
    EXPECT_EQ(sent.EndsAt(Byte('s')), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(sent.still_to_come(), 0u);
  }
  call_.stop_at_eos = false;  // EOS is an ordinary token then
  SentTokens sent(call_, tokenizer_, start_);
  sent.Add(Produced(kEosId), start_);
  EXPECT_EQ(sent.EndsAt(kEosId), std::nullopt);
}

}  // namespace
}  // namespace yoco
