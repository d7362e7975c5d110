// RegexConstraint: an answer that must match a regular expression whole (the gRPC
// response_format.regex), as a LogitConstraint. The tokens allowed depend only on the pattern's
// state, so RegexMasks keeps them per state for every sequence that uses the pattern: a pattern
// asked with every question costs its trie walks once.
#ifndef YOCO_LIB_GRAMMAR_REGEX_CONSTRAINT_H_
#define YOCO_LIB_GRAMMAR_REGEX_CONSTRAINT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "lib/grammar/char_dfa.h"
#include "lib/grammar/token_mask.h"
#include "lib/model/logit_constraint.h"

namespace yoco {

class RegexMasks {
 public:
  RegexMasks(CharDfa dfa, std::shared_ptr<const TokenVocabulary> vocabulary);

  const CharDfa& dfa() const { return dfa_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }

  // Bit id of the result: whether token id continues the text at `at`.
  using Bits = TokenBits;
  std::shared_ptr<const Bits> Allowed(const CharDfa::Cursor& at) const;

 private:
  static constexpr size_t kMaxCachedBytes = 4 << 20;  // per pattern
  CharDfa dfa_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  mutable absl::Mutex mu_;
  // Masks at the states between characters (a token that ends inside one is walked afresh).
  mutable absl::flat_hash_map<int32_t, std::shared_ptr<const Bits>> by_state_ ABSL_GUARDED_BY(mu_);
};

class RegexConstraint : public LogitConstraint {
 public:
  // `end_id`: the token that ends the text (EOS).
  RegexConstraint(std::shared_ptr<const RegexMasks> masks, int32_t end_id);

  void Mask(absl::Span<float> logits) const override;
  void Accept(int32_t token) override;
  std::unique_ptr<LogitConstraint> Clone() const override;

  const CharDfa::Cursor& cursor() const { return at_; }

 private:
  std::shared_ptr<const RegexMasks> masks_;
  int32_t end_id_;
  CharDfa::Cursor at_;
};

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_REGEX_CONSTRAINT_H_
