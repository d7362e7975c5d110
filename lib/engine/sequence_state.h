// SequenceState: everything a sequence needs to continue decoding after the tokens it has
// seen: the shared K/V rows of the cross-decoder and each self-decoder layer's constant-size
// state. Recurrent states are fp32; the shared K/V is fp32 or bf16 (KvRows).
#ifndef YOCO_LIB_ENGINE_SEQUENCE_STATE_H_
#define YOCO_LIB_ENGINE_SEQUENCE_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "lib/engine/kv_rows.h"
#include "lib/model/model_config.h"

namespace yoco {

// A backend's copy of a state in its own memory (a GPU's), kept between Forward calls so a
// decode step moves only what changed. It is a cache, not part of the state's value: copies of
// a state start without one, and equality ignores it. Code that edits a state's vectors in
// place, rather than assigning a new state, must Reset() it.
class DeviceCopy {
 public:
  DeviceCopy() = default;
  DeviceCopy(const DeviceCopy&) {}
  DeviceCopy& operator=(const DeviceCopy&) {
    handle_.reset();
    return *this;
  }
  DeviceCopy(DeviceCopy&&) = default;
  DeviceCopy& operator=(DeviceCopy&&) = default;

  void Reset() { handle_.reset(); }
  const std::shared_ptr<void>& handle() const { return handle_; }
  void set_handle(std::shared_ptr<void> handle) { handle_ = std::move(handle); }

  bool operator==(const DeviceCopy&) const { return true; }

 private:
  std::shared_ptr<void> handle_;
};

struct SequenceState {
  // Tokens processed so far; also the number of valid shared K/V rows and the position of the
  // next token.
  int64_t position = 0;
  // Per self-decoder layer, config.self_state_floats() floats:
  //   gRet: S [n_self_heads, ds, ds] (k index, v index), k scaling included;
  //   SWA:  K ring then V ring, each [W, n_self_heads * ds], row of position p at slot p % W.
  std::vector<std::vector<float>> self_states;
  KvRows shared_k;    // [position, n_attn_kv_heads * da], RoPE applied; held in lanes
  KvRows shared_v;    // [position, n_attn_kv_heads * da], the same dtype as shared_k
  DeviceCopy device;  // see DeviceCopy

  // The empty state (position 0) for `config`.
  static SequenceState Create(const ModelConfig& config);

  // Checks the sizes against `config` and, past position 0, the K/V dtype.
  absl::Status CheckShape(const ModelConfig& config) const;

  // Bytes of decoding state held: the shared K/V plus the self-decoder states.
  int64_t bytes() const;

  bool operator==(const SequenceState&) const = default;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_SEQUENCE_STATE_H_
