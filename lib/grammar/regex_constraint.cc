// Masks are made by the vocabulary's trie walk and kept per state up to a byte budget.
#include "lib/grammar/regex_constraint.h"

#include <utility>

namespace yoco {

RegexMasks::RegexMasks(CharDfa dfa, std::shared_ptr<const TokenVocabulary> vocabulary)
    : dfa_(std::move(dfa)), vocabulary_(std::move(vocabulary)) {}

std::shared_ptr<const RegexMasks::Bits> RegexMasks::Allowed(const CharDfa::Cursor& at) const {
  const bool between = at.pending == 0;
  if (between) {
    absl::MutexLock lock(&mu_);
    auto it = by_state_.find(at.state);
    if (it != by_state_.end()) return it->second;
  }
  auto bits = std::make_shared<const Bits>(vocabulary_->Allowed(dfa_, at));
  if (between) {
    absl::MutexLock lock(&mu_);
    if ((by_state_.size() + 1) * bits->size() * 8 <= kMaxCachedBytes) by_state_[at.state] = bits;
  }
  return bits;
}

RegexConstraint::RegexConstraint(std::shared_ptr<const RegexMasks> masks, int32_t end_id)
    : masks_(std::move(masks)), end_id_(end_id), at_(masks_->dfa().Start()) {}

void RegexConstraint::Mask(absl::Span<float> logits) const {
  const CharDfa& dfa = masks_->dfa();
  std::shared_ptr<const RegexMasks::Bits> bits;
  if (dfa.Open(at_)) bits = masks_->Allowed(at_);
  MaskLogits(bits.get(), masks_->vocabulary().size(), end_id_, dfa.Accepting(at_), logits);
}

void RegexConstraint::Accept(int32_t token) {
  if (token < 0 || token >= masks_->vocabulary().size()) return;
  // A token the mask refused never comes (a client's replayed ones came through it).
  CharDfa::Cursor next = at_;
  if (masks_->dfa().Walk(&next, masks_->vocabulary().bytes(token))) at_ = next;
}

std::unique_ptr<LogitConstraint> RegexConstraint::Clone() const {
  return std::make_unique<RegexConstraint>(*this);
}

}  // namespace yoco
