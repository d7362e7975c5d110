// SequenceState: everything a sequence needs to continue decoding after the tokens it has
// seen: the shared K/V rows of the cross-decoder and each self-decoder layer's constant-size
// state. Recurrent states are fp32.
#ifndef YOCO_LIB_ENGINE_SEQUENCE_STATE_H_
#define YOCO_LIB_ENGINE_SEQUENCE_STATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "lib/engine/model_config.h"

namespace yoco {

struct SequenceState {
  // Tokens processed so far; also the number of valid shared K/V rows and the position of the
  // next token.
  int64_t position = 0;
  // Per self-decoder layer, config.self_state_floats() floats:
  //   gRet: S [n_self_heads, ds, ds] (k index, v index), k scaling included;
  //   SWA:  K ring then V ring, each [W, n_self_heads * ds], row of position p at slot p % W.
  std::vector<std::vector<float>> self_states;
  std::vector<float> shared_k;  // [position, n_attn_kv_heads * da], RoPE applied
  std::vector<float> shared_v;  // [position, n_attn_kv_heads * da]

  // The empty state (position 0) for `config`.
  static SequenceState Create(const ModelConfig& config);

  // Checks the sizes against `config`.
  absl::Status CheckShape(const ModelConfig& config) const;

  // Bytes of decoding state held: the shared K/V plus the self-decoder states.
  int64_t bytes() const;

  bool operator==(const SequenceState&) const = default;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_SEQUENCE_STATE_H_
