// The baseline's forward pass, structured like CpuBackend's: stacked rows for every product,
// attention per sequence over its own cache.
#include "tools/baseline/transformer_baseline.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/rms_norm.h"
#include "lib/engine/dtype.h"
#include "lib/engine/kv_attention_inputs.h"

namespace yoco {
namespace {

float NextUniform(uint64_t* state) {  // xorshift64*, in [-1, 1)
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  const uint64_t r = *state * 0x2545F4914F6CDD1Dull;
  return static_cast<float>(static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0);
}

}  // namespace

int64_t TransformerBaseline::Sequence::bytes() const {
  int64_t n = 0;
  for (size_t l = 0; l < k.size(); ++l) n += k[l].bytes() + v[l].bytes();
  return n;
}

cpu::WeightMatrix TransformerBaseline::MakeMatrix(int64_t rows, int64_t cols, WeightFormat format,
                                                  uint64_t* state, bool pack) {
  const int64_t n = rows * cols;
  const float amplitude = 0.02f * std::sqrt(3.0f);  // uniform with std 0.02
  if (format == WeightFormat::kQ8 && cpu::CanQuantizeQ8(rows, cols)) {
    std::vector<float> wide(n);
    for (int64_t i = 0; i < n; ++i) wide[i] = amplitude * NextUniform(state);
    std::unique_ptr<uint8_t[]> data(new uint8_t[cpu::Q8Bytes(rows, cols)]);
    cpu::QuantizeQ8(wide.data(), rows, cols, data.get());
    cpu::WeightMatrix m{data.get(), cpu::WeightType::kQ8, rows, cols};
    storage_.push_back(std::move(data));
    return m;
  }
  const bool bf16 = format == WeightFormat::kBF16 || format == WeightFormat::kQ8;
  std::unique_ptr<uint8_t[]> data(new uint8_t[n * (bf16 ? 2 : 4)]);
  for (int64_t i = 0; i < n; ++i) {
    const float x = amplitude * NextUniform(state);
    if (bf16) {
      reinterpret_cast<uint16_t*>(data.get())[i] = FloatToBf16(x);
    } else {
      reinterpret_cast<float*>(data.get())[i] = x;
    }
  }
  cpu::WeightMatrix m{data.get(), bf16 ? cpu::WeightType::kBF16 : cpu::WeightType::kF32, rows,
                      cols};
  // Streamed bf16 matrices in the layout YOCO's loader gives them, so the two models' products
  // run the same kernels; the embedding is read a row at a time and stays row-major.
  if (bf16 && pack && cpu::CanPackBf16(rows, cols)) {
    std::unique_ptr<uint8_t[]> packed(new uint8_t[n * 2]);
    cpu::PackBf16Rows(reinterpret_cast<const uint16_t*>(data.get()), rows, cols,
                      reinterpret_cast<uint16_t*>(packed.get()));
    data = std::move(packed);
    m = {data.get(), cpu::WeightType::kBF16, rows, cols, true};
  }
  storage_.push_back(std::move(data));
  return m;
}

TransformerBaseline::TransformerBaseline(const ModelConfig& config, WeightFormat format,
                                         uint64_t seed)
    : config_(config), rope_(config.cross_head_dim(), config.rope_theta) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
  const int64_t D = config.dim, F = config.hidden_dim, V = config.vocab_size, KV = config.kv_dim();
  embed_ = MakeMatrix(V, D, format, &state, /*pack=*/false);
  output_ = MakeMatrix(V, D, format, &state);
  final_norm_.assign(D, 1.0f);
  for (int l = 0; l < config.n_layers; ++l) {
    Layer layer;
    layer.attn_norm.assign(D, 1.0f);
    layer.ffn_norm.assign(D, 1.0f);
    layer.q = MakeMatrix(D, D, format, &state);
    layer.k = MakeMatrix(KV, D, format, &state);
    layer.v = MakeMatrix(KV, D, format, &state);
    layer.out = MakeMatrix(D, D, format, &state);
    layer.ffn = {MakeMatrix(F, D, format, &state), MakeMatrix(F, D, format, &state),
                 MakeMatrix(D, F, format, &state)};
    layers_.push_back(std::move(layer));
  }
}

TransformerBaseline::Sequence TransformerBaseline::NewSequence() const {
  Sequence s;
  s.k.assign(config_.n_layers, KvRows::SharedKeys(config_.kv_dtype, config_.kv_dim()));
  s.v.assign(config_.n_layers, KvRows::SharedValues(config_.kv_dtype, config_.kv_dim()));
  return s;
}

std::vector<const cpu::WeightMatrix*> TransformerBaseline::step_matrices() const {
  std::vector<const cpu::WeightMatrix*> m = {&output_};
  for (const Layer& l : layers_) {
    for (const cpu::WeightMatrix* w :
         {&l.q, &l.k, &l.v, &l.out, &l.ffn.fc1, &l.ffn.gate, &l.ffn.fc2}) {
      m.push_back(w);
    }
  }
  return m;
}

absl::Status TransformerBaseline::Forward(absl::Span<Sequence* const> sequences,
                                          absl::Span<const absl::Span<const int32_t>> tokens,
                                          std::vector<float>* logits) {
  if (sequences.size() != tokens.size() || sequences.empty()) {
    return absl::InvalidArgumentError("one token list per sequence is required");
  }
  const int64_t D = config_.dim, KV = config_.kv_dim(), V = config_.vocab_size;
  const int Ha = config_.n_attn_heads, da = config_.cross_head_dim();
  const float eps = static_cast<float>(config_.norm_eps);
  row_position_.clear();
  segment_begin_.clear();
  int64_t max_position = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    if (tokens[s].empty())
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has no tokens"));
    for (int32_t t : tokens[s]) {
      if (t < 0 || t >= V)
        return absl::InvalidArgumentError(absl::StrCat("token id ", t, " out of range"));
    }
    segment_begin_.push_back(static_cast<int64_t>(row_position_.size()));
    for (size_t t = 0; t < tokens[s].size(); ++t)
      row_position_.push_back(sequences[s]->position + t);
    max_position = std::max<int64_t>(max_position, sequences[s]->position + tokens[s].size());
  }
  segment_begin_.push_back(static_cast<int64_t>(row_position_.size()));
  rope_.Reserve(max_position);
  const int64_t R = static_cast<int64_t>(row_position_.size());
  auto sized = [](std::vector<float>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    return v.data();
  };
  float* h = sized(h_, R * D);
  float* a = sized(a_, R * D);
  float* q = sized(q_, R * D);
  float* k = sized(k_, R * KV);
  float* v = sized(v_, R * KV);
  float* o = sized(o_, R * D);
  const float embed_scale = std::sqrt(static_cast<float>(D));
  for (size_t s = 0; s < sequences.size(); ++s) {
    for (size_t t = 0; t < tokens[s].size(); ++t) {
      float* row = h + (segment_begin_[s] + t) * D;
      embed_.RowToFloat(tokens[s][t], row);
      for (int64_t i = 0; i < D; ++i) row[i] *= embed_scale;
    }
  }
  const cpu::GqaShape shape{Ha, config_.n_attn_kv_heads, da};
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& w = layers_[l];
    cpu::RmsNorm(h, R, D, D, w.attn_norm.data(), eps, a);
    const cpu::LinearOutput projections[] = {{&w.q, q}, {&w.k, k}, {&w.v, v}};
    cpu::FusedLinear(a, R, projections, &wide_);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t p = row_position_[r];
      cpu::ApplyRope(q + r * D, Ha, da, rope_.cos(p), rope_.sin(p));
      cpu::ApplyRope(k + r * KV, config_.n_attn_kv_heads, da, rope_.cos(p), rope_.sin(p));
    }
    for (size_t s = 0; s < sequences.size(); ++s) {
      const int64_t r0 = segment_begin_[s], r1 = segment_begin_[s + 1];
      sequences[s]->k[l].Append(k + r0 * KV, r1 - r0);
      sequences[s]->v[l].Append(v + r0 * KV, r1 - r0);
    }
    // Decode rows go through the decode kernel together; prefill runs blocked.
    decode_queries_.clear();
    for (size_t s = 0; s < sequences.size(); ++s) {
      const int64_t r0 = segment_begin_[s];
      if (segment_begin_[s + 1] - r0 != 1) continue;
      decode_queries_.push_back(DecodeQueryOver(q + r0 * D, sequences[s]->k[l], sequences[s]->v[l],
                                                row_position_[r0] + 1, o + r0 * D));
    }
    cpu::DecodeAttention(shape, decode_queries_.data(),
                         static_cast<int64_t>(decode_queries_.size()), &decode_scratch_);
    for (size_t s = 0; s < sequences.size(); ++s) {
      const int64_t r0 = segment_begin_[s], T = segment_begin_[s + 1] - r0;
      if (T == 1) continue;
      const F32KvRows kv =
          F32RowsOf(sequences[s]->k[l], sequences[s]->v[l], row_position_[r0] + T, &wide_kv_);
      cpu::CausalAttention(shape, row_position_[r0], T, q + r0 * D, D, kv.k, kv.v, KV, 0,
                           o + r0 * D, D, &scores_);
    }
    cpu::Linear(o, R, w.out, h, /*accumulate=*/true, &wide_);
    FfnBlock(w.ffn, w.ffn_norm.data(), eps, h, R, &ffn_scratch_);
  }
  for (size_t s = 0; s < sequences.size(); ++s) sequences[s]->position += tokens[s].size();

  const int64_t B = static_cast<int64_t>(sequences.size());
  float* last = sized(last_, B * D);
  for (int64_t s = 0; s < B; ++s) {
    std::memcpy(last + s * D, h + (segment_begin_[s + 1] - 1) * D, D * sizeof(float));
  }
  cpu::RmsNorm(last, B, D, D, final_norm_.data(), eps, last);
  logits->resize(B * V);
  cpu::Linear(last, B, output_, logits->data(), false, &wide_);
  return absl::OkStatus();
}

}  // namespace yoco
