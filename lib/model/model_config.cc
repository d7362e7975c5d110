// Parsing and validation of params.json.
#include "lib/model/model_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "lib/files/bounded_file.h"
#include "lib/model/strict_json.h"
#include "lib/status/status_macros.h"
#include "nlohmann/json.hpp"

namespace yoco {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxParamsJsonBytes = 1 << 20;
constexpr int64_t kMaxSequenceStateBytes = int64_t{16} << 30;

absl::Status ReadInt(const Json& j, const char* key, int* out) {
  const Json& v = j.at(key);
  if (!v.is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("params.json: '", key, "' must be an integer"));
  }
  const int64_t x = v.get<int64_t>();
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("params.json: '", key, "' is out of range"));
  }
  *out = static_cast<int>(x);
  return absl::OkStatus();
}

absl::Status ReadDouble(const Json& j, const char* key, double* out) {
  const Json& v = j.at(key);
  if (!v.is_number()) {
    return absl::InvalidArgumentError(absl::StrCat("params.json: '", key, "' must be a number"));
  }
  *out = v.get<double>();
  return absl::OkStatus();
}

absl::Status Positive(const char* key, int v) {
  if (v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.json: '", key, "' must be positive, got ", v));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t ModelConfig::self_state_floats() const {
  const int64_t ds = self_head_dim();
  if (sliding_window) return 2LL * *sliding_window * n_self_heads * ds;
  return static_cast<int64_t>(n_self_heads) * ds * ds;
}

absl::StatusOr<ModelConfig> ModelConfig::FromJson(const std::string& text) {
  absl::StatusOr<Json> parsed = ParseStrictJson(text, {.max_depth = 4, .max_values = 1000});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("params.json: ", parsed.status().message()));
  }
  const Json& j = *parsed;
  if (!j.is_object()) return absl::InvalidArgumentError("params.json: must be a JSON object");

  static const char* kRequired[] = {"dim",          "n_layers",        "hidden_dim", "n_self_heads",
                                    "n_attn_heads", "n_attn_kv_heads", "vocab_size"};
  static const char* kOptional[] = {"max_batch_size",  "max_seq_len", "model_parallel_size",
                                    "load_checkpoint", "rope_theta",  "norm_eps",
                                    "sliding_window"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kRequired) known |= key == k;
    for (const char* k : kOptional) known |= key == k;
    if (!known)
      return absl::InvalidArgumentError(absl::StrCat("params.json: unknown key '", key, "'"));
  }
  for (const char* k : kRequired) {
    if (!j.contains(k)) {
      return absl::InvalidArgumentError(
          absl::StrCat("params.json: missing required key '", k, "'"));
    }
  }

  ModelConfig c;
  RETURN_IF_ERROR(ReadInt(j, "dim", &c.dim));
  RETURN_IF_ERROR(ReadInt(j, "n_layers", &c.n_layers));
  RETURN_IF_ERROR(ReadInt(j, "hidden_dim", &c.hidden_dim));
  RETURN_IF_ERROR(ReadInt(j, "n_self_heads", &c.n_self_heads));
  RETURN_IF_ERROR(ReadInt(j, "n_attn_heads", &c.n_attn_heads));
  RETURN_IF_ERROR(ReadInt(j, "n_attn_kv_heads", &c.n_attn_kv_heads));
  RETURN_IF_ERROR(ReadInt(j, "vocab_size", &c.vocab_size));
  if (j.contains("max_batch_size"))
    RETURN_IF_ERROR(ReadInt(j, "max_batch_size", &c.max_batch_size));
  if (j.contains("max_seq_len")) RETURN_IF_ERROR(ReadInt(j, "max_seq_len", &c.max_seq_len));
  if (j.contains("model_parallel_size")) {
    RETURN_IF_ERROR(ReadInt(j, "model_parallel_size", &c.model_parallel_size));
  }
  if (j.contains("load_checkpoint")) {
    if (!j.at("load_checkpoint").is_boolean()) {
      return absl::InvalidArgumentError("params.json: 'load_checkpoint' must be a boolean");
    }
    c.load_checkpoint = j.at("load_checkpoint").get<bool>();
  }
  if (j.contains("rope_theta")) RETURN_IF_ERROR(ReadDouble(j, "rope_theta", &c.rope_theta));
  if (j.contains("norm_eps")) RETURN_IF_ERROR(ReadDouble(j, "norm_eps", &c.norm_eps));
  if (j.contains("sliding_window") && !j.at("sliding_window").is_null()) {
    int w = 0;
    RETURN_IF_ERROR(ReadInt(j, "sliding_window", &w));
    c.sliding_window = w;
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::StatusOr<ModelConfig> ModelConfig::FromFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadBoundedFile(path, kMaxParamsJsonBytes);
  if (!text.ok()) return text.status();
  auto config = FromJson(*text);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

absl::Status ModelConfig::Validate() const {
  RETURN_IF_ERROR(Positive("dim", dim));
  RETURN_IF_ERROR(Positive("hidden_dim", hidden_dim));
  RETURN_IF_ERROR(Positive("n_self_heads", n_self_heads));
  RETURN_IF_ERROR(Positive("n_attn_heads", n_attn_heads));
  RETURN_IF_ERROR(Positive("n_attn_kv_heads", n_attn_kv_heads));
  RETURN_IF_ERROR(Positive("vocab_size", vocab_size));
  if (n_layers < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.json: 'n_layers' must be at least 2, got ", n_layers));
  }
  if (dim % n_self_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.json: 'dim' (", dim, ") is not divisible by 'n_self_heads' (", n_self_heads, ")"));
  }
  if (dim % n_attn_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.json: 'dim' (", dim, ") is not divisible by 'n_attn_heads' (", n_attn_heads, ")"));
  }
  if (n_attn_heads % n_attn_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("params.json: 'n_attn_heads' (", n_attn_heads,
                                                   ") is not divisible by 'n_attn_kv_heads' (",
                                                   n_attn_kv_heads, ")"));
  }
  // RoPE rotates pairs, and the linspace frequencies need at least two of them.
  if (self_head_dim() % 2 != 0 || self_head_dim() < 4) {
    return absl::InvalidArgumentError(absl::StrCat("params.json: self head dim dim/n_self_heads = ",
                                                   self_head_dim(), " must be even and >= 4"));
  }
  if (cross_head_dim() % 2 != 0 || cross_head_dim() < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.json: cross head dim dim/n_attn_heads = ", cross_head_dim(),
                     " must be even and >= 4"));
  }
  if (model_parallel_size != 1) {
    return absl::InvalidArgumentError(
        "params.json: 'model_parallel_size' must be 1 (load a merged checkpoint)");
  }
  if (max_seq_len == 0 || max_seq_len < -1) {
    return absl::InvalidArgumentError("params.json: 'max_seq_len' must be positive or -1");
  }
  if (!(rope_theta > 1.0) || !std::isfinite(rope_theta)) {
    return absl::InvalidArgumentError("params.json: 'rope_theta' must be a finite number > 1");
  }
  if (!(norm_eps > 0.0) || !std::isfinite(norm_eps)) {
    return absl::InvalidArgumentError("params.json: 'norm_eps' must be a finite number > 0");
  }
  if (sliding_window && *sliding_window <= 0) {
    return absl::InvalidArgumentError("params.json: 'sliding_window' must be positive or null");
  }
  // Far beyond any real model, and small enough that nothing sized from them (the list of
  // expected tensors, a sequence's state) can exhaust memory before the checkpoint is checked.
  struct Bound {
    const char* key;
    int64_t value, max;
  };
  const Bound bounds[] = {{"n_layers", n_layers, 1024},
                          {"dim", dim, 65536},
                          {"hidden_dim", hidden_dim, 1 << 20},
                          {"n_self_heads", n_self_heads, 4096},
                          {"n_attn_heads", n_attn_heads, 4096},
                          {"vocab_size", vocab_size, 1 << 22},
                          {"max_seq_len", max_seq_len, 1 << 24},
                          {"sliding_window", sliding_window.value_or(0), 1 << 20}};
  for (const Bound& b : bounds) {
    if (b.value > b.max) {
      return absl::InvalidArgumentError(absl::StrCat("params.json: '", b.key, "' (", b.value,
                                                     ") exceeds the supported maximum ", b.max));
    }
  }
  if (sliding_window && max_seq_len > 0 && *sliding_window > max_seq_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.json: 'sliding_window' (", *sliding_window,
                     ") is longer than 'max_seq_len' (", max_seq_len, ")"));
  }
  const int64_t state_bytes = self_state_floats() * 4 * n_self_layers();
  if (state_bytes > kMaxSequenceStateBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.json: one sequence's self-decoder state would take ", state_bytes,
        " bytes (more than ", kMaxSequenceStateBytes, "); check 'sliding_window' and the heads"));
  }
  return absl::OkStatus();
}

std::string ModelConfig::ToJson() const {
  Json j = Json::object();
  j["dim"] = dim;
  j["n_layers"] = n_layers;
  j["hidden_dim"] = hidden_dim;
  j["n_self_heads"] = n_self_heads;
  j["n_attn_heads"] = n_attn_heads;
  j["n_attn_kv_heads"] = n_attn_kv_heads;
  j["vocab_size"] = vocab_size;
  j["max_batch_size"] = max_batch_size;
  j["max_seq_len"] = max_seq_len;
  j["model_parallel_size"] = model_parallel_size;
  j["load_checkpoint"] = load_checkpoint;
  j["rope_theta"] = rope_theta;
  j["norm_eps"] = norm_eps;
  if (sliding_window) j["sliding_window"] = *sliding_window;
  return j.dump(2) + "\n";
}

}  // namespace yoco
