// SequenceState construction and checks.
#include "lib/engine/sequence_state.h"

#include "absl/strings/str_cat.h"

namespace yoco {

SequenceState SequenceState::Create(const ModelConfig& config) {
  SequenceState s;
  s.shared_k = KvRows::SharedKeys(config.kv_dtype, config.kv_dim());
  s.shared_v = KvRows::SharedValues(config.kv_dtype, config.kv_dim());
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
  if (shared_k.values() != kv || shared_v.values() != kv ||
      (position > 0 &&
       (shared_k.width() != config.kv_dim() || shared_v.width() != config.kv_dim()))) {
    return absl::InvalidArgumentError(
        "sequence state: shared K/V size does not match the position");
  }
  // Without rows the dtype is the backend's to choose.
  const KvDtype kv_dtype = config.kv_dtype;
  if (position > 0 && (shared_k.dtype() != kv_dtype || shared_v.dtype() != kv_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence state: shared K/V held in ", KvDtypeName(shared_k.dtype()), "/",
                     KvDtypeName(shared_v.dtype()), ", this engine holds ", KvDtypeName(kv_dtype)));
  }
  return absl::OkStatus();
}

int64_t SequenceState::bytes() const {
  int64_t n = shared_k.bytes() + shared_v.bytes();
  for (const auto& s : self_states) n += static_cast<int64_t>(s.size() * sizeof(float));
  return n;
}

}  // namespace yoco
