// JsonConstraint: structured output as a LogitConstraint — the tokens whose bytes continue text
// the schema accepts, and the end token once the text is a whole value (then only it, when
// nothing may follow). JsonMasks keeps the masks per matcher state for every sequence that uses
// the schema: long strings and arrays stop counting past their bounds, so their states repeat
// and a large vocabulary's trie is walked once per state, not once per token.
#ifndef YOCO_LIB_GRAMMAR_JSON_CONSTRAINT_H_
#define YOCO_LIB_GRAMMAR_JSON_CONSTRAINT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "lib/grammar/json_matcher.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/token_mask.h"
#include "lib/model/logit_constraint.h"

namespace yoco {

class JsonMasks {
 public:
  JsonMasks(std::shared_ptr<const JsonSchema> schema,
            std::shared_ptr<const TokenVocabulary> vocabulary);

  const JsonSchema& schema() const { return *schema_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }

  // Bit id of the result: whether token id continues the matcher's text.
  using Bits = TokenBits;
  std::shared_ptr<const Bits> Allowed(const JsonMatcher& matcher) const;

 private:
  static constexpr size_t kMaxCachedBytes = 4 << 20;  // per schema
  std::shared_ptr<const JsonSchema> schema_;          // the matchers' nodes live here
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<std::vector<JsonMatcher::Reading>, std::shared_ptr<const Bits>>
      by_state_ ABSL_GUARDED_BY(mu_);
  mutable size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

class JsonConstraint : public LogitConstraint {
 public:
  // `end_id`: the token that ends the text (EOS).
  JsonConstraint(std::shared_ptr<const JsonMasks> masks, int32_t end_id);
  // With masks of its own (kept by its clones).
  JsonConstraint(std::shared_ptr<const JsonSchema> schema,
                 std::shared_ptr<const TokenVocabulary> vocabulary, int32_t end_id);

  void Mask(absl::Span<float> logits) const override;
  void Accept(int32_t token) override;
  std::unique_ptr<LogitConstraint> Clone() const override;

  const JsonMatcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const JsonMasks> masks_;
  int32_t end_id_;
  JsonMatcher matcher_;
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_JSON_CONSTRAINT_H_
