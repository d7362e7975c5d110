// Schemas are compiled once per text while they are in use.
#include "lib/grammar/structured_output.h"

#include <algorithm>

#include "lib/grammar/json_constraint.h"

namespace yoco {

StructuredOutput::StructuredOutput(const std::vector<std::string>& token_bytes)
    : vocabulary_(std::make_shared<TokenVocabulary>(token_bytes)),
      any_object_(std::make_shared<JsonSchema>(JsonSchema::AnyObject())) {}

absl::StatusOr<std::unique_ptr<LogitConstraint>> StructuredOutput::ConstraintFor(
    const SamplingParams& sampling) const {
  if (!sampling.Constrained()) return nullptr;
  std::shared_ptr<const JsonSchema> schema = any_object_;
  if (!sampling.json_schema.empty()) {
    absl::MutexLock lock(&mu_);
    auto it = std::find_if(compiled_.begin(), compiled_.end(),
                           [&](const auto& e) { return e.first == sampling.json_schema; });
    if (it != compiled_.end()) {
      schema = it->second;
      compiled_.erase(it);
    } else {
      absl::StatusOr<JsonSchema> made = JsonSchema::Compile(sampling.json_schema);
      if (!made.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("json_schema: ", made.status().message()));
      }
      schema = std::make_shared<JsonSchema>(*std::move(made));
      if (compiled_.size() >= kCachedSchemas) compiled_.pop_front();
    }
    compiled_.emplace_back(sampling.json_schema, schema);
  }
  return std::make_unique<JsonConstraint>(std::move(schema), vocabulary_, kEosId);
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
