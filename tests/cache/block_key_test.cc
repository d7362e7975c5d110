// Block keys: the documented chain (checked against SHA-256 computed by Python's hashlib),
// prefix property, and separation by model and salt.
#include "lib/cache/block_key.h"

#include <gtest/gtest.h>

namespace yoco {
namespace {

std::vector<int32_t> Tokens(int n, int mul) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * mul) % 1000;
  return t;
}

TEST(BlockKeyTest, MatchesTheDocumentedChain) {
  // Expected values: hashlib.sha256 over the byte layout block_key.h documents.
  const auto keys = PrefixBlockKeys(0x0123456789abcdefull, "tenant", Tokens(300, 37));
  ASSERT_EQ(keys.size(), 2u);  // 300 tokens: two full blocks
  EXPECT_EQ(keys[0].Hex(), "fa6aa69626e425b0ae89742cd0721b44");
  EXPECT_EQ(keys[1].Hex(), "f98538909f9477d428301e90e745f062");
}

// What a worker uses to tell a salt's snapshots: the chain's first step from the salt's root.
TEST(BlockKeyTest, RootAndNextRebuildTheChain) {
  const auto t = Tokens(300, 37);
  const auto keys = PrefixBlockKeys(0x0123456789abcdefull, "tenant", t);
  const BlockKey root = PrefixRootKey(0x0123456789abcdefull, "tenant");
  const BlockKey first = NextBlockKey(root, absl::MakeConstSpan(t).subspan(0, kCacheBlockTokens));
  EXPECT_EQ(first, keys[0]);
  EXPECT_EQ(
      NextBlockKey(first, absl::MakeConstSpan(t).subspan(kCacheBlockTokens, kCacheBlockTokens)),
      keys[1]);
  EXPECT_NE(NextBlockKey(PrefixRootKey(0x0123456789abcdefull, "other"),
                         absl::MakeConstSpan(t).subspan(0, kCacheBlockTokens)),
            keys[0]);
}

TEST(BlockKeyTest, KeysNamePrefixes) {
  const auto a = Tokens(512, 37);
  auto b = a;
  b[300] += 1;  // block 2 differs
  const auto ka = PrefixBlockKeys(7, "", a), kb = PrefixBlockKeys(7, "", b);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_EQ(ka[1], kb[1]);
  EXPECT_NE(ka[2], kb[2]);
  EXPECT_NE(ka[3], kb[3]);  // every later key depends on the changed block
}

TEST(BlockKeyTest, ModelsAndTenantsNeverShare) {
  const auto t = Tokens(128, 11);
  const BlockKey base = PrefixBlockKeys(1, "", t)[0];
  EXPECT_NE(base, PrefixBlockKeys(2, "", t)[0]);
  EXPECT_NE(base, PrefixBlockKeys(1, "a", t)[0]);
  EXPECT_NE(PrefixBlockKeys(1, "ab", t)[0], PrefixBlockKeys(1, "a", t)[0]);
}

TEST(BlockKeyTest, HexRoundTripsAndRejectsJunk) {
  const BlockKey k = PrefixBlockKeys(3, "", Tokens(128, 5))[0];
  auto back = BlockKey::FromHex(k.Hex());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, k);
  EXPECT_FALSE(BlockKey::FromHex("abc").ok());
  EXPECT_FALSE(BlockKey::FromHex(std::string(32, 'g')).ok());
}

}  // namespace
}  // namespace yoco
