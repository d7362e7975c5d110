// LogitConstraint: a rule on which tokens may come next (structured output), kept per sequence
// and advanced with each token the sequence takes. Like the logit adjustments it is a pure
// function of the tokens so far, so a sequence resumed elsewhere rebuilds it by accepting them
// again and draws the same tokens.
#ifndef YOCO_LIB_MODEL_LOGIT_CONSTRAINT_H_
#define YOCO_LIB_MODEL_LOGIT_CONSTRAINT_H_

#include <cstdint>
#include <memory>

#include "absl/types/span.h"

namespace yoco {

class LogitConstraint {
 public:
  virtual ~LogitConstraint() = default;
  // Sets the logits [vocab] of the tokens that may not come next to -inf (never all of them).
  virtual void Mask(absl::Span<float> logits) const = 0;
  // The token that came next.
  virtual void Accept(int32_t token) = 0;
  virtual std::unique_ptr<LogitConstraint> Clone() const = 0;
};

// A LogitConstraint held by value: copies clone it (a sequence's copies go their own ways).
class HeldConstraint {
 public:
  HeldConstraint() = default;
  explicit HeldConstraint(std::unique_ptr<LogitConstraint> c) : c_(std::move(c)) {}
  HeldConstraint(const HeldConstraint& o) : c_(o.c_ ? o.c_->Clone() : nullptr) {}
  HeldConstraint& operator=(const HeldConstraint& o) {
    c_ = o.c_ ? o.c_->Clone() : nullptr;
    return *this;
  }
  HeldConstraint(HeldConstraint&&) = default;
  HeldConstraint& operator=(HeldConstraint&&) = default;

  LogitConstraint* get() const { return c_.get(); }
  LogitConstraint* operator->() const { return c_.get(); }
  explicit operator bool() const { return c_ != nullptr; }

 private:
  std::unique_ptr<LogitConstraint> c_;
};

}  // namespace yoco

#endif  // YOCO_LIB_MODEL_LOGIT_CONSTRAINT_H_
