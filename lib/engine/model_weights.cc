// Binding checkpoint tensors to the model's layers.
#include "lib/engine/model_weights.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/checksum/crc32c.h"
#include "lib/status/status_macros.h"

namespace yoco {
namespace {

// FNV-1a style 64-bit mixing; the fingerprint needs identity, not secrecy.
class Hasher {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ull;
    }
  }
  void Add(const std::string& s) {
    Add(s.data(), s.size());
    Add("\0", 1);
  }
  void Add(uint64_t v) { Add(&v, sizeof v); }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> ModelWeights::ExpectedTensors(
    const ModelConfig& c) {
  const int64_t D = c.dim, F = c.hidden_dim, V = c.vocab_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> t;
  t.push_back({"embed_tokens.weight", {V, D}});
  t.push_back({"output_projection.weight", {V, D}});
  auto ffn = [&](const std::string& p) {
    t.push_back({p + "ffn.fc1.weight", {F, D}});
    t.push_back({p + "ffn.gate.weight", {F, D}});
    t.push_back({p + "ffn.fc2.weight", {D, F}});
  };
  for (int i = 0; i < c.n_self_layers(); ++i) {
    const std::string p = absl::StrCat("self_decoder.layers.", i, ".");
    t.push_back({p + "mixer.q_proj.weight", {D, D}});
    t.push_back({p + "mixer.k_proj.weight", {D, D}});
    t.push_back({p + "mixer.v_proj.weight", {D, D}});
    if (c.self_attention() == SelfAttentionKind::kGatedRetention) {
      t.push_back({p + "mixer.g_proj.weight", {D, D}});
      t.push_back({p + "mixer.gt_proj.weight", {c.n_self_heads, D}});
    }
    t.push_back({p + "mixer.out_proj.weight", {D, D}});
    t.push_back({p + "mixer_layer_norm.weight", {D}});
    ffn(p);
    t.push_back({p + "final_layer_norm.weight", {D}});
  }
  t.push_back({"cross_decoder.k_proj.weight", {c.kv_dim(), D}});
  t.push_back({"cross_decoder.v_proj.weight", {c.kv_dim(), D}});
  t.push_back({"cross_decoder.kv_layer_norm.weight", {D}});
  for (int j = 0; j < c.n_cross_layers(); ++j) {
    const std::string p = absl::StrCat("cross_decoder.layers.", j, ".");
    t.push_back({p + "mixer.q_proj.weight", {D, D}});
    t.push_back({p + "mixer.out_proj.weight", {D, D}});
    t.push_back({p + "mixer_layer_norm.weight", {D}});
    ffn(p);
    t.push_back({p + "final_layer_norm.weight", {D}});
  }
  t.push_back({"layer_norm.weight", {D}});
  return t;
}

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::FromCheckpoint(
    const ModelConfig& config, Checkpoint checkpoint, WeightFormat format) {
  using cpu::WeightType;
  std::unique_ptr<ModelWeights> w(new ModelWeights());
  w->checkpoint_ = std::move(checkpoint);
  const auto& tensors = w->checkpoint_.tensors();
  const auto expected = ExpectedTensors(config);

  std::set<std::string> expected_names;
  for (const auto& [name, shape] : expected) expected_names.insert(name);
  for (const auto& [name, view] : tensors) {
    if (!expected_names.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint has unexpected tensor '", name,
                                                     "' (not part of this config's model)"));
    }
  }

  Hasher hasher;
  hasher.Add(config.ToJson());
  // fp32 K/V adds nothing, so fingerprints (and the bundles and snapshot files that carry them)
  // stay what they were before the K/V dtype existed.
  if (config.kv_dtype != KvDtype::kF32) hasher.Add("kv_dtype=" + KvDtypeName(config.kv_dtype));
  struct Bound {
    const void* data;
    WeightType type;
    bool packed = false;
  };
  std::map<std::string, Bound> bound;
  for (const auto& [name, shape] : expected) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint is missing tensor '", name, "' ", ShapeString(shape)));
    }
    const TensorView& view = it->second;
    if (view.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape ",
                                                     ShapeString(view.shape), ", expected ",
                                                     ShapeString(shape)));
    }
    const int64_t n = view.num_elements();
    // One NaN or infinity makes every logit NaN: refuse it here, by name, rather than serve
    // garbage (the pass costs about as much as the CRC below).
    if (const int64_t bad = FirstNonFinite(view.dtype, view.data, n); bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name,
                                                     "' holds a non-finite value (NaN or "
                                                     "infinity) at element ",
                                                     bad));
    }
    hasher.Add(name);
    hasher.Add(std::string(DTypeName(view.dtype)));
    hasher.Add(
        static_cast<uint64_t>(Crc32c(view.data, static_cast<size_t>(n) * DTypeSize(view.dtype))));
    // Norm weights (1-D) are always fp32; matrices follow `format`.
    const bool matrix = shape.size() == 2;
    WeightType type = WeightType::kF32;
    if (matrix && (format == WeightFormat::kBF16 || format == WeightFormat::kQ8 ||
                   (format == WeightFormat::kAsStored && view.dtype == DType::kBF16))) {
      type = WeightType::kBF16;
    }
    if (matrix && format == WeightFormat::kQ8 && name != "embed_tokens.weight" &&
        cpu::CanQuantizeQ8(shape[0], shape[1])) {
      type = WeightType::kQ8;
    }
    const DType want = type == WeightType::kF32 ? DType::kF32 : DType::kBF16;
    // What computes, not only what was stored.
    hasher.Add(type == WeightType::kQ8 ? std::string("Q8") : std::string(DTypeName(want)));
    const size_t align = type == WeightType::kBF16 ? 2 : 4;
    // bf16 matrices that layers stream are packed for decode (cpu::WeightMatrix::packed); the
    // embedding is only ever read a row at a time.
    const bool pack = type == WeightType::kBF16 && name != "embed_tokens.weight" &&
                      cpu::CanPackBf16(shape[0], shape[1]);
    if (type == WeightType::kQ8) {
      std::vector<float> wide(n);
      ConvertToFloat(view.dtype, view.data, n, wide.data());
      HugePageBuffer q8(cpu::Q8Bytes(shape[0], shape[1]));
      cpu::QuantizeQ8(wide.data(), shape[0], shape[1], q8.data());
      bound[name] = {q8.data(), type};
      w->converted_.push_back(std::move(q8));
    } else if (pack) {
      std::vector<uint16_t> row_major;
      const uint16_t* src = reinterpret_cast<const uint16_t*>(view.data);
      if (view.dtype != DType::kBF16 || reinterpret_cast<uintptr_t>(view.data) % align != 0) {
        row_major.resize(n);
        ConvertToBf16(view.dtype, view.data, n, row_major.data());
        src = row_major.data();
      }
      HugePageBuffer packed(n * sizeof(uint16_t));
      cpu::PackBf16Rows(src, shape[0], shape[1], reinterpret_cast<uint16_t*>(packed.data()));
      bound[name] = {packed.data(), type, true};
      w->converted_.push_back(std::move(packed));
    } else if (view.dtype == want && reinterpret_cast<uintptr_t>(view.data) % align == 0) {
      bound[name] = {view.data, type};
    } else {
      HugePageBuffer copy(n * DTypeSize(want));
      if (want == DType::kF32) {
        ConvertToFloat(view.dtype, view.data, n, reinterpret_cast<float*>(copy.data()));
      } else {
        ConvertToBf16(view.dtype, view.data, n, reinterpret_cast<uint16_t*>(copy.data()));
      }
      bound[name] = {copy.data(), type};
      w->converted_.push_back(std::move(copy));
    }
  }
  w->fingerprint_ = hasher.value();

  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    const Bound& b = bound.at(name);
    return Matrix{b.data, b.type, rows, cols, b.packed};
  };
  auto vec = [&](const std::string& name) {
    return static_cast<const float*>(bound.at(name).data);
  };
  const int64_t D = config.dim, F = config.hidden_dim, V = config.vocab_size;
  auto ffn = [&](const std::string& p) {
    return FfnWeights{matrix(p + "ffn.fc1.weight", F, D), matrix(p + "ffn.gate.weight", F, D),
                      matrix(p + "ffn.fc2.weight", D, F)};
  };
  w->embed = matrix("embed_tokens.weight", V, D);
  w->output = matrix("output_projection.weight", V, D);
  for (int i = 0; i < config.n_self_layers(); ++i) {
    const std::string p = absl::StrCat("self_decoder.layers.", i, ".");
    SelfLayerWeights l;
    l.mixer_norm = vec(p + "mixer_layer_norm.weight");
    l.q = matrix(p + "mixer.q_proj.weight", D, D);
    l.k = matrix(p + "mixer.k_proj.weight", D, D);
    l.v = matrix(p + "mixer.v_proj.weight", D, D);
    if (config.self_attention() == SelfAttentionKind::kGatedRetention) {
      l.g = matrix(p + "mixer.g_proj.weight", D, D);
      l.gt = matrix(p + "mixer.gt_proj.weight", config.n_self_heads, D);
    }
    l.out = matrix(p + "mixer.out_proj.weight", D, D);
    l.ffn_norm = vec(p + "final_layer_norm.weight");
    l.ffn = ffn(p);
    w->self_layers.push_back(l);
  }
  w->kv_norm = vec("cross_decoder.kv_layer_norm.weight");
  w->kv_k = matrix("cross_decoder.k_proj.weight", config.kv_dim(), D);
  w->kv_v = matrix("cross_decoder.v_proj.weight", config.kv_dim(), D);
  for (int j = 0; j < config.n_cross_layers(); ++j) {
    const std::string p = absl::StrCat("cross_decoder.layers.", j, ".");
    CrossLayerWeights l;
    l.mixer_norm = vec(p + "mixer_layer_norm.weight");
    l.q = matrix(p + "mixer.q_proj.weight", D, D);
    l.out = matrix(p + "mixer.out_proj.weight", D, D);
    l.ffn_norm = vec(p + "final_layer_norm.weight");
    l.ffn = ffn(p);
    w->cross_layers.push_back(l);
  }
  w->final_norm = vec("layer_norm.weight");
  return w;
}

std::vector<const Matrix*> ModelWeights::matrices() const {
  std::vector<const Matrix*> all = {&embed, &output, &kv_k, &kv_v};
  auto add_ffn = [&](const FfnWeights& f) { all.insert(all.end(), {&f.fc1, &f.gate, &f.fc2}); };
  for (const auto& l : self_layers) {
    all.insert(all.end(), {&l.q, &l.k, &l.v, &l.out});
    if (l.g.data != nullptr) all.insert(all.end(), {&l.g, &l.gt});
    add_ffn(l.ffn);
  }
  for (const auto& l : cross_layers) {
    all.insert(all.end(), {&l.q, &l.out});
    add_ffn(l.ffn);
  }
  return all;
}

int64_t ModelWeights::matrix_bytes() const {
  int64_t n = 0;
  for (const Matrix* m : matrices()) n += m->bytes();
  return n;
}

int64_t ModelWeights::matrix_params() const {
  int64_t n = 0;
  for (const Matrix* m : matrices()) n += m->rows * m->cols;
  return n;
}

std::string WeightFormatName(WeightFormat format) {
  switch (format) {
    case WeightFormat::kAsStored:
      return "as-stored";
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kQ8:
      return "q8";
  }
  return "?";
}

absl::StatusOr<WeightFormat> ParseWeightFormat(absl::string_view name) {
  for (WeightFormat f :
       {WeightFormat::kAsStored, WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8}) {
    if (name == WeightFormatName(f)) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("weights must be as-stored, f32, bf16 or q8, not '", name, "'"));
}

}  // namespace yoco
