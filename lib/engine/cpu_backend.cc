// The forward pass. Rows of all segments are stacked so every projection and FFN is one matrix
// product; the mixers then run per segment over their own state.
#include "lib/engine/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/gated_retention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/sliding_window_attention.h"
#include "lib/engine/kv_attention_inputs.h"

namespace yoco {
namespace {

template <typename T>
T* Sized(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<const Model> model, CpuBackendOptions options)
    : model_(std::move(model)),
      options_(options),
      config_(model_->config()),
      weights_(model_->weights()),
      self_rope_(config_.self_head_dim(), config_.rope_theta),
      cross_rope_(config_.cross_head_dim(), config_.rope_theta) {
  cpu::SetKernelThreads(options.threads);
}

template <typename Work>
void CpuBackend::Timed(double CpuProfile::*kind, Work work) {
  if (!options_.profile) return work();
  const double t0 = NowMs();
  work();
  profile_.*kind += NowMs() - t0;
}

absl::Status CpuBackend::Forward(absl::Span<const ForwardSegment> segments,
                                 std::vector<float>* logits) {
  if (absl::Status st = ValidateSegments(config_, segments); !st.ok()) return st;
  const double start_ms = options_.profile ? NowMs() : 0;
  const int64_t D = config_.dim;
  const int64_t V = config_.vocab_size;

  rows_.clear();
  out_rows_.clear();
  segment_begin_.clear();
  for (size_t s = 0; s < segments.size(); ++s) {
    const ForwardSegment& seg = segments[s];
    segment_begin_.push_back(static_cast<int64_t>(rows_.size()));
    const int64_t t_count = static_cast<int64_t>(seg.tokens.size());
    for (int64_t t = 0; t < t_count; ++t) {
      const bool wants =
          seg.logits == LogitsMode::kAll || (seg.logits == LogitsMode::kLast && t == t_count - 1);
      if (wants) out_rows_.push_back(static_cast<int64_t>(rows_.size()));
      rows_.push_back({static_cast<int>(s), seg.state->position + t});
    }
  }
  const bool decode_step =
      static_cast<int64_t>(rows_.size()) == static_cast<int64_t>(segments.size());
  arithmetic_ = options_.batch_invariant && decode_step ? cpu::RowArithmetic::kPerRow
                                                        : cpu::RowArithmetic::kFastest;
  rope_positions_.clear();
  for (const Row& row : rows_) rope_positions_.push_back(row.position);
  self_rope_.Prepare(rope_positions_);
  cross_rope_.Prepare(rope_positions_);
  const int64_t R = static_cast<int64_t>(rows_.size());

  // Embedding, scaled by sqrt(dim) in fp32 as the reference.
  float* h = Sized(h_, R * D);
  const float embed_scale = static_cast<float>(std::sqrt(static_cast<double>(D)));
  for (int64_t r = 0; r < R; ++r) {
    const ForwardSegment& seg = segments[rows_[r].segment];
    const int32_t tok = seg.tokens[rows_[r].position - seg.state->position];
    weights_.embed.RowToFloat(tok, h + r * D);
    for (int64_t i = 0; i < D; ++i) h[r * D + i] *= embed_scale;
  }

  for (int l = 0; l < config_.n_self_layers(); ++l) SelfLayer(l, segments);
  AppendSharedKv(segments);

  const int64_t Q = static_cast<int64_t>(out_rows_.size());
  logits->resize(Q * V);
  if (Q > 0) {
    float* hx = Sized(hx_, Q * D);
    for (int64_t i = 0; i < Q; ++i)
      std::memcpy(hx + i * D, h_.data() + out_rows_[i] * D, D * sizeof(float));
    for (int l = 0; l < config_.n_cross_layers(); ++l) CrossLayer(l, segments);

    float* a = Sized(a_, Q * D);
    cpu::RmsNorm(hx, Q, D, D, weights_.final_norm, static_cast<float>(config_.norm_eps), a);
    Timed(&CpuProfile::projection_ms,
          [&] { cpu::Linear(a, Q, weights_.output, logits->data(), false, &wide_, arithmetic_); });
  }
  if (options_.profile) {
    profile_.total_ms += NowMs() - start_ms;
    profile_.calls += 1;
  }
  return absl::OkStatus();
}

void CpuBackend::SelfLayer(int layer, absl::Span<const ForwardSegment> segments) {
  const SelfLayerWeights& w = weights_.self_layers[layer];
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int64_t D = config_.dim;
  float* a = Sized(a_, R * D);
  cpu::RmsNorm(h_.data(), R, D, D, w.mixer_norm, static_cast<float>(config_.norm_eps), a);
  if (config_.self_attention() == SelfAttentionKind::kGatedRetention) {
    GatedRetentionMixer(layer, segments);
  } else {
    SlidingWindowMixer(layer, segments);
  }
  Timed(&CpuProfile::ffn_ms, [&] {
    FfnBlock(w.ffn, w.ffn_norm, static_cast<float>(config_.norm_eps), h_.data(), R, &ffn_scratch_,
             arithmetic_);
  });
}

void CpuBackend::GatedRetentionMixer(int layer, absl::Span<const ForwardSegment> segments) {
  const SelfLayerWeights& w = weights_.self_layers[layer];
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int64_t D = config_.dim;
  const int Hs = config_.n_self_heads;
  const int ds = config_.self_head_dim();
  const float* a = a_.data();
  float* q = Sized(q_, R * D);
  float* k = Sized(k_, R * D);
  float* v = Sized(v_, R * D);
  float* g = Sized(g_, R * D);
  float* gt = Sized(gt_, R * Hs);
  float* o = Sized(o_, R * D);
  const cpu::LinearOutput projections[] = {{&w.q, q}, {&w.k, k}, {&w.v, v}, {&w.g, g}, {&w.gt, gt}};
  Timed(&CpuProfile::projection_ms,
        [&] { cpu::FusedLinear(a, R, projections, &wide_, arithmetic_); });

  const float key_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(ds)));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t p = rows_[r].position;
    cpu::ApplyRope(q + r * D, Hs, ds, self_rope_.cos(p), self_rope_.sin(p));
    cpu::ApplyRope(k + r * D, Hs, ds, self_rope_.cos(p), self_rope_.sin(p));
    for (int64_t i = 0; i < D; ++i) k[r * D + i] *= key_scale;
    for (int hh = 0; hh < Hs; ++hh) gt[r * Hs + hh] = cpu::LogSigmoid(gt[r * Hs + hh]) / 16.0f;
  }

  // One task per (segment, head): heads are independent, and each task's products run on the
  // calling thread.
  const int64_t per_thread = cpu::GatedRetentionScratchFloats(cpu::kRetentionChunk, ds);
  float* scratch = Sized(scratch_, cpu::KernelThreads() * per_thread);
  const int64_t tasks = static_cast<int64_t>(segments.size()) * Hs;
  auto run = [&](int64_t task) {
    const size_t s = static_cast<size_t>(task / Hs);
    const int hh = static_cast<int>(task % Hs);
    const int64_t r0 = segment_begin_[s];
    const int64_t T = static_cast<int64_t>(segments[s].tokens.size());
    float* S = segments[s].state->self_states[layer].data() + int64_t{hh} * ds * ds;
    const int64_t off = r0 * D + int64_t{hh} * ds;
    if (T == 1) {  // decode: the recurrent form
      cpu::GatedRetentionStep(ds, q + off, k + off, v + off, gt[r0 * Hs + hh], S, o + off);
    } else {
      cpu::GatedRetentionChunkwise(T, ds, q + off, k + off, v + off, D, gt + r0 * Hs + hh, Hs, S,
                                   o + off, D, cpu::kRetentionChunk,
                                   scratch + omp_get_thread_num() * per_thread);
    }
  };
  // A decode step's tasks cost alike, and each thread taking one run of them streams its
  // sequences' states end to end, where tasks dealt one at a time send the threads through
  // alternate heads (32 sequences × 6 layers of 6 × 128² states, 2 threads, 256 MB read between
  // layers as a step's products do: 2.5-2.6 -> 2.0-2.2 ms). Prefill chunks differ in length and
  // are dealt one at a time.
  const bool decode_only = rows_.size() == segments.size();
  Timed(&CpuProfile::retention_ms, [&] {
    if (decode_only) {
#pragma omp parallel for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) run(task);
    } else {
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) run(task);
    }
  });
  // Per-head RMSNorm without weight, then the swish gate on g, then out_proj into the residual.
  cpu::RmsNorm(o, R * Hs, ds, ds, nullptr, static_cast<float>(config_.norm_eps), o);
  cpu::SiluMul(g, o, R * D);
  Timed(&CpuProfile::projection_ms,
        [&] { cpu::Linear(g, R, w.out, h_.data(), /*accumulate=*/true, &wide_, arithmetic_); });
}

void CpuBackend::SlidingWindowMixer(int layer, absl::Span<const ForwardSegment> segments) {
  const SelfLayerWeights& w = weights_.self_layers[layer];
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int64_t D = config_.dim;
  const int Hs = config_.n_self_heads;
  const int ds = config_.self_head_dim();
  const float* a = a_.data();
  float* q = Sized(q_, R * D);
  float* k = Sized(k_, R * D);
  float* v = Sized(v_, R * D);
  float* o = Sized(o_, R * D);
  const cpu::LinearOutput projections[] = {{&w.q, q}, {&w.k, k}, {&w.v, v}};
  Timed(&CpuProfile::projection_ms,
        [&] { cpu::FusedLinear(a, R, projections, &wide_, arithmetic_); });
  for (int64_t r = 0; r < R; ++r) {
    const int64_t p = rows_[r].position;
    cpu::ApplyRope(q + r * D, Hs, ds, self_rope_.cos(p), self_rope_.sin(p));
    cpu::ApplyRope(k + r * D, Hs, ds, self_rope_.cos(p), self_rope_.sin(p));
  }
  const cpu::SlidingWindowShape shape{Hs, ds, *config_.sliding_window};
  Timed(&CpuProfile::retention_ms, [&] {
    for (size_t s = 0; s < segments.size(); ++s) {
      const int64_t off = segment_begin_[s] * D;
      SequenceState* st = segments[s].state;
      float* ring_k = st->self_states[layer].data();
      float* ring_v = ring_k + shape.window * D;
      cpu::SlidingWindowAttention(shape, st->position,
                                  static_cast<int64_t>(segments[s].tokens.size()), q + off, k + off,
                                  v + off, ring_k, ring_v, o + off, &window_scratch_);
    }
  });
  Timed(&CpuProfile::projection_ms,
        [&] { cpu::Linear(o, R, w.out, h_.data(), /*accumulate=*/true, &wide_, arithmetic_); });
}

void CpuBackend::AppendSharedKv(absl::Span<const ForwardSegment> segments) {
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int64_t D = config_.dim;
  const int64_t KV = config_.kv_dim();
  float* a = Sized(a_, R * D);
  float* kk = Sized(kv_k_, R * KV);
  float* vv = Sized(kv_v_, R * KV);
  cpu::RmsNorm(h_.data(), R, D, D, weights_.kv_norm, static_cast<float>(config_.norm_eps), a);
  const cpu::LinearOutput projections[] = {{&weights_.kv_k, kk}, {&weights_.kv_v, vv}};
  Timed(&CpuProfile::projection_ms,
        [&] { cpu::FusedLinear(a, R, projections, &wide_, arithmetic_); });
  for (int64_t r = 0; r < R; ++r) {
    const int64_t p = rows_[r].position;
    cpu::ApplyRope(kk + r * KV, config_.n_attn_kv_heads, config_.cross_head_dim(),
                   cross_rope_.cos(p), cross_rope_.sin(p));
  }
  for (size_t s = 0; s < segments.size(); ++s) {
    SequenceState* st = segments[s].state;
    const int64_t T = static_cast<int64_t>(segments[s].tokens.size());
    const int64_t r0 = segment_begin_[s];
    if (st->position == 0) {  // an empty state takes this backend's K/V dtype
      st->shared_k = KvRows::SharedKeys(config_.kv_dtype, KV);
      st->shared_v = KvRows::SharedValues(config_.kv_dtype, KV);
    }
    st->shared_k.Append(kk + r0 * KV, T);
    st->shared_v.Append(vv + r0 * KV, T);
    st->position += T;
  }
}

void CpuBackend::CrossLayer(int layer, absl::Span<const ForwardSegment> segments) {
  const CrossLayerWeights& w = weights_.cross_layers[layer];
  const int64_t Q = static_cast<int64_t>(out_rows_.size());
  const int64_t D = config_.dim;
  const int Ha = config_.n_attn_heads;
  const int da = config_.cross_head_dim();
  float* a = Sized(a_, Q * D);
  float* q = Sized(q_, Q * D);
  float* o = Sized(o_, Q * D);
  cpu::RmsNorm(hx_.data(), Q, D, D, w.mixer_norm, static_cast<float>(config_.norm_eps), a);
  Timed(&CpuProfile::projection_ms, [&] { cpu::Linear(a, Q, w.q, q, false, &wide_, arithmetic_); });
  const cpu::GqaShape shape{Ha, config_.n_attn_kv_heads, da};
  for (int64_t i = 0; i < Q; ++i) {
    const int64_t p = rows_[out_rows_[i]].position;
    cpu::ApplyRope(q + i * D, Ha, da, cross_rope_.cos(p), cross_rope_.sin(p));
  }
  // Causal, aligned bottom-right: the query at position p sees shared K/V rows [0, p]. Runs of
  // consecutive query rows of one segment (full-sequence scoring) go through the blocked kernel;
  // single rows (decode, prefill's last position) through the decode kernel, all at once.
  const int64_t KV = config_.kv_dim();
  Timed(&CpuProfile::attention_ms, [&] {
    int64_t i = 0;
    std::vector<int64_t>& singles = single_rows_;  // rows attended as decode queries
    singles.clear();
    while (i < Q) {
      int64_t j = i + 1;
      while (j < Q && rows_[out_rows_[j]].segment == rows_[out_rows_[i]].segment) ++j;
      if (j - i >= 16) {
        const Row& first = rows_[out_rows_[i]];
        const SequenceState& st = *segments[first.segment].state;
        const F32KvRows kv =
            F32RowsOf(st.shared_k, st.shared_v, first.position + (j - i), &wide_kv_);
        cpu::CausalAttention(shape, first.position, j - i, q + i * D, D, kv.k, kv.v, KV, 0,
                             o + i * D, D, &scratch_);
      } else {
        for (int64_t r = i; r < j; ++r) singles.push_back(r);
      }
      i = j;
    }
    decode_queries_.clear();
    for (int64_t r : singles) {
      const Row& row = rows_[out_rows_[r]];
      const SequenceState& st = *segments[row.segment].state;
      decode_queries_.push_back(
          DecodeQueryOver(q + r * D, st.shared_k, st.shared_v, row.position + 1, o + r * D));
    }
    cpu::DecodeAttention(shape, decode_queries_.data(),
                         static_cast<int64_t>(decode_queries_.size()), &decode_scratch_);
  });
  Timed(&CpuProfile::projection_ms,
        [&] { cpu::Linear(o, Q, w.out, hx_.data(), /*accumulate=*/true, &wide_, arithmetic_); });
  Timed(&CpuProfile::ffn_ms, [&] {
    FfnBlock(w.ffn, w.ffn_norm, static_cast<float>(config_.norm_eps), hx_.data(), Q, &ffn_scratch_,
             arithmetic_);
  });
}

}  // namespace yoco
