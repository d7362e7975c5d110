// ModelConfig: the model's hyper-parameters, read from a checkpoint's params.json (the
// reference's YOCOArgs keys) and validated before any weight is touched.
#ifndef YOCO_LIB_MODEL_MODEL_CONFIG_H_
#define YOCO_LIB_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "lib/model/kv_dtype.h"

namespace yoco {

// Which efficient self-attention the self-decoder layers use.
enum class SelfAttentionKind { kGatedRetention, kSlidingWindow };

struct ModelConfig {
  // YOCOArgs fields, with the reference's defaults.
  int dim = 0;
  int n_layers = 0;
  int hidden_dim = 0;
  int n_self_heads = 0;
  int n_attn_heads = 0;
  int n_attn_kv_heads = 0;
  int vocab_size = 0;
  int max_batch_size = 0;       // runtime setting of the reference; not used by the engine
  int max_seq_len = -1;         // -1: no limit besides memory
  int model_parallel_size = 1;  // only 1 is supported
  bool load_checkpoint = false;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  std::optional<int> sliding_window;  // set: SWA self-decoder with this window (keys incl. self)

  // Engine setting, not a params.json key: how the shared K/V is held. Part of the model's
  // fingerprint when bf16, so states of the two forms are never mixed.
  KvDtype kv_dtype = KvDtype::kF32;

  // Derived shapes.
  int n_self_layers() const { return n_layers / 2; }  // an odd last layer is dropped
  int n_cross_layers() const { return n_layers / 2; }
  int self_head_dim() const { return dim / n_self_heads; }           // ds
  int cross_head_dim() const { return dim / n_attn_heads; }          // da
  int kv_dim() const { return n_attn_kv_heads * cross_head_dim(); }  // shared K (or V) row width
  SelfAttentionKind self_attention() const {
    return sliding_window ? SelfAttentionKind::kSlidingWindow : SelfAttentionKind::kGatedRetention;
  }
  // Floats of one self-decoder layer's decoding state (gRet: Hs*ds*ds; SWA: the window's K and V).
  int64_t self_state_floats() const;

  // Parses params.json text. Unknown keys, missing required keys, wrong types and inconsistent
  // shapes are INVALID_ARGUMENT errors naming the field.
  static absl::StatusOr<ModelConfig> FromJson(const std::string& text);
  static absl::StatusOr<ModelConfig> FromFile(const std::string& path);

  // params.json text holding every field (stable key order), parsable by FromJson.
  std::string ToJson() const;

  // Checks the relations between fields; FromJson calls it.
  absl::Status Validate() const;
};

}  // namespace yoco

#endif  // YOCO_LIB_MODEL_MODEL_CONFIG_H_
