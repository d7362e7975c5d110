// SequenceState construction and checks.
#include "lib/engine/sequence_state.h"

#include "absl/strings/str_cat.h"

namespace yoco {

SequenceState SequenceState::Create(const ModelConfig& config) {
  SequenceState s;
  s.self_states.assign(config.n_self_layers(),
                       std::vector<float>(config.self_state_floats(), 0.0f));
  return s;
}

absl::Status SequenceState::CheckShape(const ModelConfig& config) const {
  if (position < 0) return absl::InvalidArgumentError("sequence state: negative position");
  if (static_cast<int>(self_states.size()) != config.n_self_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("sequence state: ", self_states.size(),
                                                   " self-decoder layers, model has ",
                                                   config.n_self_layers()));
  }
  for (const auto& s : self_states) {
    if (static_cast<int64_t>(s.size()) != config.self_state_floats()) {
      return absl::InvalidArgumentError(
          "sequence state: self-decoder state size does not match the model");
    }
  }
  const int64_t kv = position * config.kv_dim();
  if (static_cast<int64_t>(shared_k.size()) != kv || static_cast<int64_t>(shared_v.size()) != kv) {
    return absl::InvalidArgumentError(
        "sequence state: shared K/V size does not match the position");
  }
  return absl::OkStatus();
}

int64_t SequenceState::bytes() const {
  int64_t n = static_cast<int64_t>(shared_k.size() + shared_v.size());
  for (const auto& s : self_states) n += static_cast<int64_t>(s.size());
  return n * static_cast<int64_t>(sizeof(float));
}

}  // namespace yoco
