// JsonConstraint: structured output as a LogitConstraint — the tokens whose bytes continue text
// the schema accepts (TokenVocabulary over a JsonMatcher), and the end token once the text is a
// whole value (then only it, when nothing may follow).
#ifndef YOCO_LIB_GRAMMAR_JSON_CONSTRAINT_H_
#define YOCO_LIB_GRAMMAR_JSON_CONSTRAINT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/grammar/json_matcher.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/token_mask.h"
#include "lib/model/logit_constraint.h"

namespace yoco {

class JsonConstraint : public LogitConstraint {
 public:
  // `end_id`: the token that ends the text (EOS).
  JsonConstraint(std::shared_ptr<const JsonSchema> schema,
                 std::shared_ptr<const TokenVocabulary> vocabulary, int32_t end_id);

  void Mask(absl::Span<float> logits) const override;
  void Accept(int32_t token) override;
  std::unique_ptr<LogitConstraint> Clone() const override;

  const JsonMatcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const JsonSchema> schema_;  // the matcher's nodes live here
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  int32_t end_id_;
  JsonMatcher matcher_;
  mutable std::vector<uint8_t> allowed_;  // Mask's scratch
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_JSON_CONSTRAINT_H_
