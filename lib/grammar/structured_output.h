// StructuredOutput: a worker's maker of structured-output constraints — its vocabulary's token
// bytes (from the tokenizer the router uses too) and the schemas and patterns compiled lately
// (with a pattern's masks), since a RAG client sends the same one with every question.
#ifndef YOCO_LIB_GRAMMAR_STRUCTURED_OUTPUT_H_
#define YOCO_LIB_GRAMMAR_STRUCTURED_OUTPUT_H_

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/grammar/json_constraint.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/regex_constraint.h"
#include "lib/grammar/token_mask.h"
#include "lib/model/logit_constraint.h"
#include "lib/model/sampling_params.h"

namespace yoco {

class StructuredOutput {
 public:
  // token_bytes[id] for every id of the model's vocabulary (empty: a special id).
  explicit StructuredOutput(const std::vector<std::string>& token_bytes);

  // VocabularyFingerprint(token_bytes): workers report it, the router checks it is its own.
  uint64_t vocabulary_fingerprint() const { return vocabulary_fingerprint_; }

  // The constraint `sampling` asks for (its json_object, json_schema or regex), at the start of
  // the answer; null when it asks for none. INVALID_ARGUMENT for a schema or pattern that does
  // not compile.
  absl::StatusOr<std::unique_ptr<LogitConstraint>> ConstraintFor(
      const SamplingParams& sampling) const;

 private:
  // One compiled schema or pattern, by its text.
  struct Compiled {
    bool regex = false;
    std::string text;
    std::shared_ptr<const JsonMasks> json;
    std::shared_ptr<const RegexMasks> regex_masks;
  };
  absl::StatusOr<Compiled> Find(bool regex, const std::string& text) const;

  // Each keeps up to 4 MB of token masks (lib/grammar/json_constraint.h, regex_constraint.h).
  static constexpr size_t kCached = 32;
  const uint64_t vocabulary_fingerprint_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::shared_ptr<const JsonMasks> any_object_;
  mutable absl::Mutex mu_;
  mutable std::deque<Compiled> compiled_ ABSL_GUARDED_BY(mu_);  // most recent last
};

// What a worker calls: the rule `sampling` asks for, having accepted `so_far` (the tokens the
// sequence generated already); null when it asks for none. FAILED_PRECONDITION when `source`
// is null (a worker without structured output), INVALID_ARGUMENT for a bad schema.
absl::StatusOr<std::unique_ptr<LogitConstraint>> MakeConstraint(
    const StructuredOutput* source, const SamplingParams& sampling,
    absl::Span<const int32_t> so_far = {});

}  // namespace yoco

#endif  // YOCO_LIB_GRAMMAR_STRUCTURED_OUTPUT_H_
