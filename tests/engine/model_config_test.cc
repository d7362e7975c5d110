// params.json parsing: valid files load, every kind of defect is an error naming the field.
#include "lib/model/model_config.h"

#include <gtest/gtest.h>

#include <cctype>

namespace yoco {
namespace {

constexpr char kValid[] = R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2,
  "n_attn_heads": 4, "n_attn_kv_heads": 2, "vocab_size": 512, "rope_theta": 10000.0,
  "norm_eps": 1e-05})";

TEST(ModelConfigTest, ParsesReferenceKeysAndDerivesShapes) {
  auto c = ModelConfig::FromJson(kValid);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_self_layers(), 2);
  EXPECT_EQ(c->self_head_dim(), 128);
  EXPECT_EQ(c->cross_head_dim(), 64);
  EXPECT_EQ(c->kv_dim(), 128);
  EXPECT_EQ(c->self_attention(), SelfAttentionKind::kGatedRetention);
  EXPECT_EQ(c->self_state_floats(), 2 * 128 * 128);
  auto again = ModelConfig::FromJson(c->ToJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ToJson(), c->ToJson());
}

TEST(ModelConfigTest, SlidingWindowAndOddLayerCount) {
  auto c = ModelConfig::FromJson(R"({"dim": 64, "n_layers": 5, "hidden_dim": 128, "n_self_heads": 2,
    "n_attn_heads": 2, "n_attn_kv_heads": 1, "vocab_size": 50, "sliding_window": 8})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->self_attention(), SelfAttentionKind::kSlidingWindow);
  EXPECT_EQ(c->n_self_layers(), 2);  // the reference drops the odd layer
  EXPECT_EQ(c->n_cross_layers(), 2);
  EXPECT_EQ(c->self_state_floats(), 2 * 8 * 64);
  auto null_window = ModelConfig::FromJson(R"({"dim": 64, "n_layers": 2, "hidden_dim": 128,
    "n_self_heads": 2, "n_attn_heads": 2, "n_attn_kv_heads": 1, "vocab_size": 50, "sliding_window": null})");
  ASSERT_TRUE(null_window.ok());
  EXPECT_EQ(null_window->self_attention(), SelfAttentionKind::kGatedRetention);
}

struct BadCase {
  const char* json;
  const char* mentions;  // the field (or fact) the message must name
};

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, IsInvalidArgumentNamingTheField) {
  auto c = ModelConfig::FromJson(GetParam().json);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(GetParam().mentions), std::string::npos) << c.status();
}

INSTANTIATE_TEST_SUITE_P(
    Defects, BadConfigTest,
    ::testing::Values(
        BadCase{"{not json", "not valid JSON"}, BadCase{"[1, 2]", "JSON object"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2})",
            "vocab_size"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512, "n_heads": 8})",
            "n_heads"},
        BadCase{
            R"({"dim": "256", "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512})",
            "dim"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 3, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512})",
            "n_self_heads"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 3, "vocab_size": 512})",
            "n_attn_kv_heads"},
        BadCase{
            R"({"dim": 256, "n_layers": 1, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512})",
            "n_layers"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": -5, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512})",
            "hidden_dim"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512, "sliding_window": 0})",
            "sliding_window"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512, "norm_eps": "small"})",
            "norm_eps"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 512, "model_parallel_size": 2})",
            "model_parallel_size"},
        BadCase{
            R"({"dim": 256, "n_layers": 4, "hidden_dim": 512, "n_self_heads": 2, "n_attn_heads": 4,
                   "n_attn_kv_heads": 2, "vocab_size": 99999999999})",
            "vocab_size"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.mentions;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name + "_" + std::to_string(info.index);
    });

}  // namespace
}  // namespace yoco
