// TiktokenBpe on small hand-made vocabularies whose expected merges are worked out by hand,
// plus the ranks-file and UTF-8 error paths.
#include "lib/text/tiktoken_bpe.h"

#include <gtest/gtest.h>

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

// "base64 rank" lines for the given tokens, ranks in order.
std::string Ranks(const std::vector<std::string>& tokens) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i)
    absl::StrAppend(&out, absl::Base64Escape(tokens[i]), " ", i, "\n");
  return out;
}

std::unique_ptr<TiktokenBpe> Make(const std::vector<std::string>& tokens,
                                  std::vector<std::pair<std::string, int32_t>> specials = {}) {
  auto bpe = TiktokenBpe::FromRanks(Ranks(tokens), kCl100kPattern, specials);
  EXPECT_TRUE(bpe.ok()) << bpe.status();
  return bpe.ok() ? std::move(*bpe) : nullptr;
}

TEST(TiktokenBpeTest, MergesLowestRankFirst) {
  // Ranks: a0 b1 c2 ab3 bc4. "abc": pairs ab(3) < bc(4) -> [ab][c]; "abc" is no token -> done.
  auto bpe = Make({"a", "b", "c", "ab", "bc"});
  std::vector<int32_t> ids;
  bpe->EncodePiece("abc", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 2}));
  // With bc ranked before ab (bc3 ab4), "abc" -> [a][bc].
  auto other = Make({"a", "b", "c", "bc", "ab"});
  ids.clear();
  other->EncodePiece("abc", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 3}));
}

TEST(TiktokenBpeTest, WholePieceTokenAndRepeatedMerges) {
  // "aaaa": pairs all "aa"(2) -> leftmost first: [aa][a][a] -> next leftmost pair [aa][aa]?
  // After the first merge the pairs are aa+a ("aaa", not a token) and a+a ("aa", 2): merge
  // -> [aa][aa]; then "aaaa"(3) is a token -> [aaaa].
  auto bpe = Make({"a", " ", "aa", "aaaa"});
  std::vector<int32_t> ids;
  bpe->EncodePiece("aaaa", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{3}));
  ids.clear();
  bpe->EncodePiece("aaaaa", &ids);  // [aa][aa][a] -> [aaaa][a]
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 0}));
}

TEST(TiktokenBpeTest, EncodeShiftsIdsSplitsPiecesAndHandlesSpecials) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.push_back("he");   // 256
  tokens.push_back("hel");  // 257
  tokens.push_back(" w");   // 258
  auto bpe = Make(tokens, {{"<|end|>", 300}});
  // Pieces by the cl100k pattern: "hel", " w", "!", then the special token.
  auto ids = bpe->Encode("hel w!<|end|>");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int32_t>{257 + 4, 258 + 4, '!' + 4, 300 + 4}));
  EXPECT_EQ(*bpe->Decode(*ids), "hel w!<|end|>");
  EXPECT_EQ(*bpe->Decode({0, 1, 257 + 4, 2}), "hel");  // reserved ids vanish
  EXPECT_EQ(bpe->Decode({299 + 4}).status().code(), absl::StatusCode::kInvalidArgument);
  // Negative ids from a client (Detokenize takes any int32): refused, never shifted past
  // INT32_MIN (found by tiktoken_fuzz under UBSan).
  for (int32_t id : {-1, -4, std::numeric_limits<int32_t>::min()}) {
    EXPECT_EQ(bpe->Decode({id}).status().code(), absl::StatusCode::kInvalidArgument) << id;
  }
  EXPECT_EQ(bpe->id_limit(), 301 + 4);
}

TEST(TiktokenBpeTest, RefusesInvalidUtf8AndBadRanks) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  auto bpe = Make(tokens);
  EXPECT_EQ(bpe->Encode("ok \xff\xfe").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TiktokenBpe::FromRanks("YQ== 0\nnot-base64!! 1\n", kCl100kPattern, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TiktokenBpe::FromRanks("YQ== x\n", kCl100kPattern, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TiktokenBpe::FromRanks("YQ== 0\n", "(unclosed", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TiktokenBpe::Load("/no/such/file", kCl100kPattern, {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TiktokenBpeTest, YocoSpecialTokensMatchTheReference) {
  const auto specials = YocoSpecialTokens();
  EXPECT_EQ(specials.size(), 5u + 18u);
  int32_t jupyter_code = -1, max_id = 0;
  for (const auto& [text, id] : specials) {
    if (text == "<jupyter_code>") jupyter_code = id;
    max_id = std::max(max_id, id);
  }
  EXPECT_EQ(jupyter_code, 100276);  // collides with <|endofprompt|>, as in the reference
  EXPECT_EQ(max_id, 100281);        // n_vocab 100282; model ids up to 100285, V = 100288
}

}  // namespace
}  // namespace yoco
