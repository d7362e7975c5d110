// The mask: the vocabulary's walk, the end token by the matcher's completeness.
#include "lib/grammar/json_constraint.h"

#include <cmath>
#include <utility>

namespace yoco {

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonSchema> schema,
                               std::shared_ptr<const TokenVocabulary> vocabulary, int32_t end_id)
    : schema_(std::move(schema)),
      vocabulary_(std::move(vocabulary)),
      end_id_(end_id),
      matcher_(*schema_) {}

void JsonConstraint::Mask(absl::Span<float> logits) const {
  const bool complete = matcher_.Complete();
  bool any = false;
  if (!matcher_.MustEnd()) {
    vocabulary_->Allowed(matcher_, &allowed_);
    for (int32_t id = 0; id < vocabulary_->size() && id < static_cast<int32_t>(logits.size());
         ++id) {
      any |= allowed_[id] != 0;
    }
  }
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool allowed =
        static_cast<int32_t>(id) == end_id_
            ? complete || !any  // (never every token refused)
            : any && static_cast<int32_t>(id) < vocabulary_->size() && allowed_[id] != 0;
    if (!allowed) logits[id] = -INFINITY;
  }
}

void JsonConstraint::Accept(int32_t token) {
  if (token < 0 || token >= vocabulary_->size()) return;
  // A token the mask refused never comes (a client's replayed ones came through it).
  matcher_.Advance(vocabulary_->bytes(token));
}

std::unique_ptr<LogitConstraint> JsonConstraint::Clone() const {
  return std::make_unique<JsonConstraint>(*this);
}

}  // namespace yoco
