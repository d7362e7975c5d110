// JsonConstraint: the masks it keeps per matcher state (shared by every sequence of a schema)
// equal feeding each token alone, on runs that revisit states — long strings and arrays, whose
// counts stop past their bounds — so most masks come from the cache.
#include "lib/grammar/json_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/grammar/schema_reference.h"

namespace yoco {
namespace {

TEST(JsonConstraintTest, KeptMasksEqualFeedingEachTokenAlone) {
  std::mt19937 rng(21);
  const std::vector<std::string> tokens = testing::RandomJsonTokens(rng);  // 2: the end
  auto vocabulary = std::make_shared<const TokenVocabulary>(tokens);
  for (const char* text : testing::kSchemas) {
    SCOPED_TRACE(text);
    absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(text);
    ASSERT_TRUE(schema.ok());
    auto masks = std::make_shared<const JsonMasks>(std::make_shared<JsonSchema>(*std::move(schema)),
                                                   vocabulary);
    for (int run = 0; run < 15; ++run) {
      JsonConstraint constraint(masks, 2);
      for (int step = 0; step < 40; ++step) {
        std::vector<float> logits(tokens.size(), 0.0f);
        constraint.Mask(absl::MakeSpan(logits));
        std::vector<int32_t> allowed;
        for (int32_t id = 3; id < static_cast<int32_t>(tokens.size()); ++id) {
          JsonMatcher alone = constraint.matcher();
          const bool takes = alone.Advance(tokens[id]);
          ASSERT_EQ(!std::isinf(logits[id]), takes) << "token '" << tokens[id] << "'";
          if (takes) allowed.push_back(id);
        }
        const bool end = !std::isinf(logits[2]);
        EXPECT_EQ(end, constraint.matcher().Complete() || allowed.empty());
        if (allowed.empty() || (end && rng() % 3 == 0)) break;
        constraint.Accept(allowed[rng() % allowed.size()]);
      }
    }
  }
}

}  // namespace
}  // namespace yoco
