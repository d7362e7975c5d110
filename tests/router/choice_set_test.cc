// ChoiceSet: who ends a choice (the worker's finish, a stop string the text completes, a first
// token that ends it), what the workers are asked to go on with, and each choice's finish.
#include "services/router/choice_set.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/text/byte_tokenizer.h"

namespace yoco {
namespace {

class ChoiceSetTest : public ::testing::Test {
 protected:
  ChoiceSetTest() {
    call_.choices = 3;
    call_.max_new_tokens = 4;
    call_.stop_at_eos = true;
    call_.stop_strings = {"ab"};
  }
  static int32_t Byte(unsigned char c) { return kTokenizerIdOffset + c; }
  // Sends `id` as a token of choice `c`, as the router does.
  void Send(ChoiceSet& choices, uint32_t c, int32_t id) {
    const bool first = choices.sent(c).ids().empty();
    v1::GeneratedToken token;
    token.set_id(id);
    choices.sent(c).Add(token, start_);
    choices.Sent(c, first, id);
  }

  CheckedGenerateRequest call_;
  ByteTokenizer tokenizer_;
  const SentTokens::Clock::time_point start_ = SentTokens::Clock::now();
};

TEST_F(ChoiceSetTest, OneChoiceWithoutN) {
  call_.choices = 1;
  const ChoiceSet choices(call_, tokenizer_, start_);
  EXPECT_EQ(choices.size(), 1u);
  EXPECT_FALSE(choices.multi());
}

TEST_F(ChoiceSetTest, AWorkersFinishEndsAChoiceUnlessItIsACancelOrAStopStringCameFirst) {
  ChoiceSet choices(call_, tokenizer_, start_);
  ASSERT_TRUE(choices.multi());
  choices.WorkerFinished(0, v1::FINISH_REASON_CANCELLED);
  choices.WorkerFinished(0, v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_FALSE(choices.ended(0));
  Send(choices, 1, Byte('a'));
  EXPECT_FALSE(choices.ended(1));  // "a" is no first token's end
  Send(choices, 1, Byte('b'));
  EXPECT_TRUE(choices.ended(1));  // "ab"
  choices.WorkerFinished(1, v1::FINISH_REASON_LENGTH);
  choices.WorkerFinished(2, v1::FINISH_REASON_EOS);
  choices.WorkerFinished(0, v1::FINISH_REASON_LENGTH);
  ASSERT_TRUE(choices.AllEnded());
  v1::Finish finish;
  choices.AddFinishes(finish);
  ASSERT_EQ(finish.choices_size(), 3);
  EXPECT_EQ(finish.choices(0).reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(finish.choices(1).reason(), v1::FINISH_REASON_STOP);  // the stop string's, kept
  EXPECT_EQ(finish.choices(1).generated_tokens(), 2u);
  EXPECT_EQ(finish.choices(2).reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(choices.FirstEnd(v1::FINISH_REASON_UNSPECIFIED), v1::FINISH_REASON_LENGTH);
}

TEST_F(ChoiceSetTest, AFirstTokenThatEndsItsChoiceEndsIt) {
  ChoiceSet choices(call_, tokenizer_, start_);
  Send(choices, 0, kEosId);
  EXPECT_TRUE(choices.ended(0));
  Send(choices, 1, Byte('q'));
  Send(choices, 1, kEosId);  // not its first: the worker says whether it ends
  EXPECT_FALSE(choices.ended(1));
  EXPECT_FALSE(choices.AllEnded());
  EXPECT_EQ(choices.FirstEnd(v1::FINISH_REASON_LENGTH), v1::FINISH_REASON_EOS);
}

TEST_F(ChoiceSetTest, OneChoicesFirstDecodedTokenWaitsForTheWorkersFinish) {
  call_.choices = 1;
  ChoiceSet choices(call_, tokenizer_, start_);
  Send(choices, 0, kEosId);  // a local prefill's: the worker's finish follows on the stream
  EXPECT_FALSE(choices.ended(0));
  choices.WorkerFinished(0, v1::FINISH_REASON_EOS);
  EXPECT_TRUE(choices.AllEnded());
}

TEST_F(ChoiceSetTest, APrefillsTokenEndsItsChoiceWhenItIsTheLast) {
  call_.choices = 1;
  call_.max_new_tokens = 2;
  ChoiceSet choices(call_, tokenizer_, start_);
  for (unsigned char c : {'q', 'r'}) {  // a retry's prefill sends the second
    EXPECT_FALSE(choices.ended(0));
    v1::GeneratedToken token;
    token.set_id(Byte(c));
    choices.sent(0).Add(token, start_);
    choices.EndIfItEndsAt(0, Byte(c));
  }
  EXPECT_EQ(choices.FirstEnd(v1::FINISH_REASON_UNSPECIFIED), v1::FINISH_REASON_LENGTH);
}

TEST_F(ChoiceSetTest, TheWorkersGoOnWithTheChoicesStillGoingFromWhatWasSent) {
  ChoiceSet choices(call_, tokenizer_, start_);
  Send(choices, 0, Byte('q'));
  Send(choices, 0, Byte('r'));
  Send(choices, 1, kEosId);
  const std::vector<ChoiceAsked> going = choices.StillGoing();
  ASSERT_EQ(going.size(), 2u);
  EXPECT_EQ(going[0].choice, 0u);
  EXPECT_EQ(std::vector<int32_t>(going[0].sent.begin(), going[0].sent.end()),
            (std::vector<int32_t>{Byte('q'), Byte('r')}));
  EXPECT_EQ(going[0].still_to_come, 2u);
  EXPECT_EQ(going[1].choice, 2u);
  EXPECT_TRUE(going[1].sent.empty());
  EXPECT_EQ(going[1].still_to_come, 4u);
}

TEST_F(ChoiceSetTest, APrefillsFirstTokensGoOnlyToChoicesWithNothingSent) {
  ChoiceSet choices(call_, tokenizer_, start_);
  Send(choices, 0, Byte('q'));  // sent before a retry: its prefill draws it again
  Send(choices, 1, kEosId);     // ended
  v1::PrefillResponse prefill;
  for (uint32_t c : {0u, 1u, 2u, 2u}) {  // the last twice: it goes once
    v1::GeneratedToken* token = prefill.add_choice_first_tokens();
    token->set_choice(c);
    token->set_id(Byte('x' + c));
  }
  absl::StatusOr<std::vector<v1::GeneratedToken>> first = choices.FirstTokensToSend(prefill);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].choice(), 2u);
  EXPECT_EQ((*first)[0].id(), Byte('z'));

  prefill.mutable_choice_first_tokens(2)->set_choice(3);  // not asked for
  EXPECT_EQ(choices.FirstTokensToSend(prefill).status().code(), absl::StatusCode::kInternal);
}

TEST_F(ChoiceSetTest, OneChoicesFirstTokenIsThePrefillsWithItsLogprobsEvenOnARetry) {
  call_.choices = 1;
  ChoiceSet choices(call_, tokenizer_, start_);
  Send(choices, 0, Byte('q'));  // a retry prefills what was sent: its token is the next
  v1::PrefillResponse prefill;
  prefill.set_first_token(Byte('r'));
  prefill.mutable_first_token_logprob()->set_logprob(-0.5f);
  prefill.add_first_token_top_logprobs()->set_id(Byte('s'));
  absl::StatusOr<std::vector<v1::GeneratedToken>> first = choices.FirstTokensToSend(prefill);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].id(), Byte('r'));
  EXPECT_EQ((*first)[0].choice(), 0u);
  EXPECT_FLOAT_EQ((*first)[0].logprob().logprob(), -0.5f);
  ASSERT_EQ((*first)[0].top_logprobs_size(), 1);
  EXPECT_EQ((*first)[0].top_logprobs(0).id(), Byte('s'));
}

}  // namespace
}  // namespace yoco
