// The router's public request checks: a good request comes through as the engine will run it;
// each kind of bad request is INVALID_ARGUMENT with a message that says what is wrong.
#include "services/router/request_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "lib/text/byte_tokenizer.h"

namespace yoco {
namespace {

class RequestChecksTest : public ::testing::Test {
 protected:
  RequestChecksTest() {
    config_.vocab_size = 300;
    config_.max_seq_len = 64;
  }
  absl::Status Check(const v1::GenerateRequest& request) {
    return CheckGenerateRequest(request, config_, tokenizer_, 16).status();
  }
  static v1::GenerateRequest Ids(std::initializer_list<int32_t> ids, uint32_t max_new) {
    v1::GenerateRequest r;
    for (int32_t id : ids) r.mutable_tokens()->add_ids(id);
    r.mutable_sampling()->set_max_new_tokens(max_new);
    return r;
  }
  void ExpectRefused(const v1::GenerateRequest& request, const std::string& words) {
    const absl::Status st = Check(request);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(words), std::string::npos) << st;
  }

  ModelConfig config_;
  ByteTokenizer tokenizer_;
};

TEST_F(RequestChecksTest, AGoodRequestComesThroughAsTheEngineRunsIt) {
  v1::GenerateRequest r;
  r.set_text("hi");
  r.mutable_sampling()->set_temperature(0.5f);
  r.mutable_sampling()->set_top_p(0);  // off on the wire
  // std::string, not a literal: GCC 12 raises a false -Wrestrict on the const char* overload.
  r.mutable_sampling()->add_stop_strings(std::string(1, '\n'));
  r.mutable_sampling()->set_stop_at_eos(true);
  auto call = CheckGenerateRequest(r, config_, tokenizer_, 16);
  ASSERT_TRUE(call.ok()) << call.status();
  const std::vector<int32_t> want = {kBosId, 'h' + kTokenizerIdOffset, 'i' + kTokenizerIdOffset};
  EXPECT_EQ(call->prompt, want);
  EXPECT_EQ(call->max_new_tokens, 16u);  // 0: the default
  EXPECT_FLOAT_EQ(call->sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(call->sampling.top_p, 1.0f);
  EXPECT_TRUE(call->stop_at_eos);
  EXPECT_EQ(call->stop_strings, std::vector<std::string>{"\n"});
}

TEST_F(RequestChecksTest, EachBadRequestSaysWhatIsWrong) {
  ExpectRefused(Ids({}, 4), "empty");
  v1::GenerateRequest empty_text;
  empty_text.set_text("");
  ExpectRefused(empty_text, "empty");
  ExpectRefused(Ids({0, 300}, 4), "token id 300 is outside the vocabulary [0, 300)");
  ExpectRefused(Ids({0, -1}, 4), "token id -1");
  v1::GenerateRequest hot = Ids({0, 5}, 4);
  hot.mutable_sampling()->set_temperature(-1);
  ExpectRefused(hot, "temperature");
  ExpectRefused(Ids({0, 5}, (1u << 20) + 1), "absurd");
  ExpectRefused(Ids({0, 5, 6}, 62), "the prompt (3 tokens) + max_new_tokens (62) exceeds");
  EXPECT_TRUE(Check(Ids({0, 5, 6}, 61)).ok());
  v1::GenerateRequest stops = Ids({0, 5}, 4);
  for (int i = 0; i < 17; ++i) stops.mutable_sampling()->add_stop_strings(std::string(1, 'x'));
  ExpectRefused(stops, "at most 16 stop strings");
  v1::GenerateRequest long_stop = Ids({0, 5}, 4);
  long_stop.mutable_sampling()->add_stop_strings(std::string(257, 'x'));
  ExpectRefused(long_stop, "1 to 256 bytes");
}

// A bad sampling setting names its field, as the HTTP front reports it ("param").
TEST_F(RequestChecksTest, BadSamplingSettingsNameTheirField) {
  struct Case {
    std::function<void(v1::SamplingParams&)> set;
    const char* field;
  } cases[] = {
      {[](v1::SamplingParams& s) { s.set_temperature(-1); }, "sampling.temperature"},
      {[](v1::SamplingParams& s) { s.set_top_p(2); }, "sampling.top_p"},
      {[](v1::SamplingParams& s) { s.set_logprobs(21); }, "sampling.logprobs"},
      {[](v1::SamplingParams& s) { (*s.mutable_logit_bias())[300] = 1; }, "sampling.logit_bias"},
      {[](v1::SamplingParams& s) { s.set_repetition_penalty(-1); }, "sampling.repetition_penalty"},
      {[](v1::SamplingParams& s) { s.set_frequency_penalty(3); }, "sampling.frequency_penalty"},
      {[](v1::SamplingParams& s) { s.set_presence_penalty(NAN); }, "sampling.presence_penalty"},
      {[](v1::SamplingParams& s) { s.set_min_p(2); }, "sampling.min_p"},
      {[](v1::SamplingParams& s) { s.add_stop_token_ids(300); }, "sampling.stop_token_ids"},
      {[](v1::SamplingParams& s) { s.set_n(17); }, "sampling.n"},
      {[](v1::SamplingParams& s) {
         s.mutable_response_format()->set_json_schema(R"({"type": "integer", "maximum": 3})");
       },
       "sampling.response_format"},
      {[](v1::SamplingParams& s) {
         s.mutable_response_format()->set_json_schema(std::string(70000, ' ') + "{}");
       },
       "sampling.response_format"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Ids({0, 5}, 4);
    c.set(*r.mutable_sampling());
    const absl::Status st = Check(r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(InvalidField(st), c.field) << st;
  }
  v1::GenerateRequest fine = Ids({0, 5}, 4);
  (*fine.mutable_sampling()->mutable_logit_bias())[299] = -100;
  (*fine.mutable_sampling()->mutable_logit_bias())[4] = 3;
  fine.mutable_sampling()->set_min_tokens(2);
  auto call = CheckGenerateRequest(fine, config_, tokenizer_, 16);
  ASSERT_TRUE(call.ok()) << call.status();
  const std::vector<std::pair<int32_t, float>> bias = {{4, 3.0f}, {299, -100.0f}};
  EXPECT_EQ(call->sampling.logit_bias, bias);  // sorted, whatever the map's order
  EXPECT_EQ(call->sampling.min_tokens, 2);
  EXPECT_FLOAT_EQ(call->sampling.repetition_penalty, 1.0f);  // 0 on the wire: off
  EXPECT_FALSE(call->stop_at_eos);

  // A structured answer ends with its value: at EOS, whatever the request said.
  fine.mutable_sampling()->mutable_response_format()->set_json_schema(R"({"type": "integer"})");
  fine.mutable_sampling()->set_n(3);
  call = CheckGenerateRequest(fine, config_, tokenizer_, 16);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(call->stop_at_eos);
  EXPECT_EQ(call->choices, 3u);
  EXPECT_EQ(call->sampling.json_schema, R"({"type": "integer"})");
}

TEST_F(RequestChecksTest, PrecacheDocumentsMustFitTheModel) {
  v1::PrecacheRequest r;
  r.set_text(std::string(63, 'd'));  // + BOS = 64
  auto document = CheckPrecacheRequest(r, config_, tokenizer_);
  ASSERT_TRUE(document.ok()) << document.status();
  EXPECT_EQ(document->size(), 64u);
  r.set_text(std::string(64, 'd'));
  EXPECT_EQ(CheckPrecacheRequest(r, config_, tokenizer_).status().message(),
            "the document (65 tokens) exceeds the model's max_seq_len 64");
}

// The last token is never fed back: a budget of exactly input + still_to_come - 1 rows is enough.
TEST(CheckFitsDecodeWorkerTest, CountsEveryRowButTheLastTokensAndNamesTheFlag) {
  EXPECT_TRUE(CheckFitsDecodeWorker(100, 29, 128).ok());
  const absl::Status st = CheckFitsDecodeWorker(100, 30, 128);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("129 K/V rows"), std::string::npos) << st;
  EXPECT_NE(st.message().find("--memory-budget-mb) holds 128"), std::string::npos) << st;
  EXPECT_TRUE(CheckFitsDecodeWorker(1u << 30, 1, 0).ok());  // no budget known: nothing refused
}

TEST(CheckRequestIdTest, PrintableAsciiUpTo128BytesOrNone) {
  EXPECT_TRUE(CheckRequestId("").ok());
  EXPECT_TRUE(CheckRequestId("rag-42 question 7").ok());
  EXPECT_TRUE(CheckRequestId(std::string(128, '~')).ok());
  for (const std::string& bad : {std::string(129, 'a'), std::string("a\nb"), std::string("tab\t"),
                                 std::string("caf\xc3\xa9"), std::string("nul\0x", 5)}) {
    const absl::Status st = CheckRequestId(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(InvalidField(st), "request_id");
  }
}

}  // namespace
}  // namespace yoco
