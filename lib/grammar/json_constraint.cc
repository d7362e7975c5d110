// The mask: the vocabulary's walk (kept per state up to a byte budget), the end token by the
// matcher's completeness.
#include "lib/grammar/json_constraint.h"

#include <utility>

namespace yoco {

JsonMasks::JsonMasks(std::shared_ptr<const JsonSchema> schema,
                     std::shared_ptr<const TokenVocabulary> vocabulary)
    : schema_(std::move(schema)), vocabulary_(std::move(vocabulary)) {}

std::shared_ptr<const JsonMasks::Bits> JsonMasks::Allowed(const JsonMatcher& matcher) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = by_state_.find(matcher.readings());
    if (it != by_state_.end()) return it->second;
  }
  auto bits = std::make_shared<const Bits>(vocabulary_->Allowed(matcher));
  absl::MutexLock lock(&mu_);
  const size_t bytes = bits->size() * 8;
  if (cached_bytes_ + bytes <= kMaxCachedBytes &&
      by_state_.emplace(matcher.readings(), bits).second) {
    cached_bytes_ += bytes;
  }
  return bits;
}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonMasks> masks, int32_t end_id)
    : masks_(std::move(masks)), end_id_(end_id), matcher_(masks_->schema()) {}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonSchema> schema,
                               std::shared_ptr<const TokenVocabulary> vocabulary, int32_t end_id)
    : JsonConstraint(std::make_shared<JsonMasks>(std::move(schema), std::move(vocabulary)),
                     end_id) {}

void JsonConstraint::Mask(absl::Span<float> logits) const {
  std::shared_ptr<const JsonMasks::Bits> bits;
  if (!matcher_.MustEnd()) bits = masks_->Allowed(matcher_);
  MaskLogits(bits.get(), masks_->vocabulary().size(), end_id_, matcher_.Complete(), logits);
}

void JsonConstraint::Accept(int32_t token) {
  if (token < 0 || token >= masks_->vocabulary().size()) return;
  // A token the mask refused never comes (a client's replayed ones came through it).
  matcher_.Advance(masks_->vocabulary().bytes(token));
}

std::unique_ptr<LogitConstraint> JsonConstraint::Clone() const {
  return std::make_unique<JsonConstraint>(*this);
}

}  // namespace yoco
