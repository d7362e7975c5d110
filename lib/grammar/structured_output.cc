// Schemas are compiled once per text while they are in use.
#include "lib/grammar/structured_output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/grammar/json_constraint.h"
#include "lib/grammar/regex.h"
#include "lib/text/tokenizer.h"

namespace yoco {

StructuredOutput::StructuredOutput(const std::vector<std::string>& token_bytes)
    : vocabulary_fingerprint_(VocabularyFingerprint(token_bytes)),
      vocabulary_(std::make_shared<TokenVocabulary>(token_bytes)),
      any_object_(std::make_shared<JsonMasks>(std::make_shared<JsonSchema>(JsonSchema::AnyObject()),
                                              vocabulary_)) {}

absl::StatusOr<StructuredOutput::Compiled> StructuredOutput::Find(bool regex,
                                                                  const std::string& text) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = std::find_if(compiled_.begin(), compiled_.end(),
                           [&](const Compiled& c) { return c.regex == regex && c.text == text; });
    if (it != compiled_.end()) {
      Compiled found = *it;
      compiled_.erase(it);
      compiled_.push_back(found);
      return found;
    }
  }
  // Compiled outside the lock: other requests need not wait for it.
  Compiled made{regex, text, nullptr, nullptr};
  if (regex) {
    absl::StatusOr<CharDfa> dfa = CompileRegex(text);
    if (!dfa.ok())
      return absl::InvalidArgumentError(absl::StrCat("regex: ", dfa.status().message()));
    made.regex_masks = std::make_shared<RegexMasks>(*std::move(dfa), vocabulary_);
  } else {
    absl::StatusOr<JsonSchema> schema = JsonSchema::Compile(text);
    if (!schema.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("json_schema: ", schema.status().message()));
    }
    made.json =
        std::make_shared<JsonMasks>(std::make_shared<JsonSchema>(*std::move(schema)), vocabulary_);
  }
  absl::MutexLock lock(&mu_);
  if (compiled_.size() >= kCached) compiled_.pop_front();
  compiled_.push_back(made);
  return made;
}

absl::StatusOr<std::unique_ptr<LogitConstraint>> StructuredOutput::ConstraintFor(
    const SamplingParams& sampling) const {
  if (!sampling.Constrained()) return nullptr;
  if (sampling.json_object) {
    return std::make_unique<JsonConstraint>(any_object_, kEosId);
  }
  const bool regex = !sampling.regex.empty();
  absl::StatusOr<Compiled> compiled = Find(regex, regex ? sampling.regex : sampling.json_schema);
  if (!compiled.ok()) return compiled.status();
  if (regex) return std::make_unique<RegexConstraint>(compiled->regex_masks, kEosId);
  return std::make_unique<JsonConstraint>(compiled->json, kEosId);
}

absl::StatusOr<std::unique_ptr<LogitConstraint>> MakeConstraint(const StructuredOutput* source,
                                                                const SamplingParams& sampling,
                                                                absl::Span<const int32_t> so_far) {
  if (!sampling.Constrained()) return nullptr;
  if (source == nullptr) {
    return absl::FailedPreconditionError("this worker has no structured output");
  }
  absl::StatusOr<std::unique_ptr<LogitConstraint>> constraint = source->ConstraintFor(sampling);
  if (!constraint.ok()) return constraint.status();
  for (int32_t token : so_far) (*constraint)->Accept(token);
  return constraint;
}

}  // namespace yoco
