// Every CUDA kernel against the CPU kernel it replaces (each of those is checked against the
// double-precision references in kernels_cpu_test), on random inputs with shapes that leave
// tails (chunks, tiles and key ranges cut short). Skipped where no GPU is present.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/gated_retention.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sliding_window_attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bf16_gemv.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gated_retention.h"
#include "kernels/cuda/rms_norm.h"
#include "lib/engine/cublas_library.h"
#include "lib/engine/cuda_weights.h"
#include "lib/engine/dtype.h"
#include "tests/kernels/random_inputs.h"

namespace yoco {
namespace {

using testing::RandomFloats;

// A device copy of a host vector; Get() reads it back. The poison fill of outputs makes an
// element the kernel never wrote show up as a mismatch.
template <typename T>
class Dev {
 public:
  explicit Dev(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_TRUE(buf_.Reserve(std::max<size_t>(n_, 1) * sizeof(T)).ok());
    cudaMemcpy(buf_.get(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  static Dev Poisoned(size_t n) { return Dev(std::vector<T>(n, static_cast<T>(-12345))); }
  T* get() const { return buf_.get<T>(); }
  std::vector<T> Get() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), buf_.get(), n_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  DeviceBuffer buf_;
};

// max |got − want| / max |want|.
double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
    ref = std::max(ref, static_cast<double>(std::fabs(want[i])));
  }
  return err / std::max(ref, 1e-30);
}

class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      GTEST_SKIP() << "no CUDA device: the CUDA kernels are compiled but not run here";
    cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, 0);
  }
  int sm_count_ = 0;
};

TEST_F(CudaKernelTest, RmsNormMatchesCpu) {
  const int64_t rows = 7;
  const int n = 1000;
  const auto x = RandomFloats(rows * n, 1, -3.0f, 3.0f);
  const auto w = RandomFloats(n, 2, 0.5f, 1.5f);
  std::vector<float> want(rows * n);
  cpu::RmsNorm(x.data(), rows, n, n, w.data(), 1e-5f, want.data());
  Dev<float> dx(x), dw(w);
  auto dy = Dev<float>::Poisoned(rows * n);
  ASSERT_EQ(cuda::RmsNorm(dx.get(), rows, n, dw.get(), 1e-5f, dy.get(), nullptr), cudaSuccess);
  EXPECT_LE(RelativeError(dy.Get(), want), 1e-6);
}

TEST_F(CudaKernelTest, RopeMatchesCpuTable) {
  const int heads = 3, d = 64, rows = 37;
  const int64_t ld = heads * d + 5;
  std::vector<int32_t> positions(rows);
  for (int r = 0; r < rows; ++r) positions[r] = r * 997 % 40000;
  const auto x = RandomFloats(rows * ld, 3);
  cpu::RopeTable table(d, 10000.0);
  table.Reserve(40000);
  std::vector<float> want = x;
  for (int r = 0; r < rows; ++r) {
    cpu::ApplyRope(want.data() + r * ld, heads, d, table.cos(positions[r]),
                   table.sin(positions[r]));
    for (int i = 0; i < heads * d; ++i) want[r * ld + i] *= 0.125f;
  }
  Dev<float> dx(x);
  Dev<int32_t> dp(positions);
  Dev<float> freq(cpu::RopeInverseFrequencies(d, 10000.0));
  ASSERT_EQ(cuda::ApplyRope(dx.get(), rows, ld, heads, d, dp.get(), freq.get(), 0.125f, nullptr),
            cudaSuccess);
  EXPECT_LE(RelativeError(dx.Get(), want), 1e-6);  // the padding columns stay untouched too
}

TEST_F(CudaKernelTest, ElementwiseMatchCpu) {
  const int64_t n = 10007;
  const auto a = RandomFloats(n, 4, -8.0f, 8.0f);
  const auto b = RandomFloats(n, 5);
  std::vector<float> silu = a, decay = a;
  cpu::SiluMul(silu.data(), b.data(), n);
  for (float& x : decay) x = cpu::LogSigmoid(x) / 16.0f;
  Dev<float> da(a), db(b), dd(a);
  ASSERT_EQ(cuda::SiluMul(da.get(), db.get(), n, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::LogSigmoidDecay(dd.get(), n, nullptr), cudaSuccess);
  EXPECT_LE(RelativeError(da.Get(), silu), 1e-6);
  EXPECT_LE(RelativeError(dd.Get(), decay), 1e-6);

  // Embedding rows from an fp32 and a bf16 table.
  const int V = 50, D = 33;
  const auto table = RandomFloats(V * D, 6);
  std::vector<uint16_t> table16(V * D);
  for (int i = 0; i < V * D; ++i) table16[i] = FloatToBf16(table[i]);
  const std::vector<int32_t> tokens = {3, 49, 0, 3, 17};
  std::vector<float> want32, want16;
  for (int32_t t : tokens) {
    for (int c = 0; c < D; ++c) {
      want32.push_back(table[t * D + c] * 2.5f);
      want16.push_back(Bf16ToFloat(table16[t * D + c]) * 2.5f);
    }
  }
  Dev<float> dt(table);
  Dev<uint16_t> dt16(table16);
  Dev<int32_t> dtok(tokens);
  auto out = Dev<float>::Poisoned(tokens.size() * D);
  ASSERT_EQ(
      cuda::EmbedRows(dt.get(), false, D, dtok.get(), tokens.size(), 2.5f, out.get(), nullptr),
      cudaSuccess);
  EXPECT_EQ(out.Get(), want32);
  ASSERT_EQ(
      cuda::EmbedRows(dt16.get(), true, D, dtok.get(), tokens.size(), 2.5f, out.get(), nullptr),
      cudaSuccess);
  EXPECT_EQ(out.Get(), want16);
}

// Two sequences' segments in one launch, lengths that end mid-chunk.
TEST_F(CudaKernelTest, RetentionChunkwiseAndStepMatchCpu) {
  for (int d : {12, 64, 128}) {
    for (int64_t T0 : {1, 2, 63, 64, 65, 300}) {
      const int heads = 3;
      const int64_t T1 = 130;
      const int64_t R = T0 + T1;
      const int64_t ld = heads * d;
      const auto q = RandomFloats(R * ld, 7 + d);
      const auto k = RandomFloats(R * ld, 8 + d, -0.2f, 0.2f);
      const auto v = RandomFloats(R * ld, 9 + d);
      auto decay = RandomFloats(R * heads, 10 + d, -4.0f, 4.0f);
      for (float& x : decay) x = cpu::LogSigmoid(x) / 16.0f;
      const auto s0 = RandomFloats(2 * heads * d * d, 11 + d, -0.3f, 0.3f);
      std::vector<float> want(R * ld), want_state = s0;
      std::vector<float> scratch(cpu::GatedRetentionScratchFloats(cpu::kRetentionChunk, d));
      const int64_t begin[2] = {0, T0}, len[2] = {T0, T1};
      for (int s = 0; s < 2; ++s) {
        for (int h = 0; h < heads; ++h) {
          const int64_t off = begin[s] * ld + h * d;
          float* S = want_state.data() + (s * heads + h) * d * d;
          if (len[s] == 1) {
            cpu::GatedRetentionStep(d, q.data() + off, k.data() + off, v.data() + off,
                                    decay[begin[s] * heads + h], S, want.data() + off);
          } else {
            cpu::GatedRetentionChunkwise(len[s], d, q.data() + off, k.data() + off, v.data() + off,
                                         ld, decay.data() + begin[s] * heads + h, heads, S,
                                         want.data() + off, ld, cpu::kRetentionChunk,
                                         scratch.data());
          }
        }
      }
      Dev<float> dq(q), dk(k), dv(v), dg(decay), ds(s0);
      auto dout = Dev<float>::Poisoned(R * ld);
      std::vector<cuda::RetentionTask> chunk, step;
      std::vector<cuda::RetentionChunk> chunks;
      for (int s = 0; s < 2; ++s) {
        float* state = ds.get() + s * heads * int64_t{d} * d;
        if (len[s] == 1) {
          step.push_back({begin[s], len[s], state, 0});
          continue;
        }
        const int64_t first = static_cast<int64_t>(chunks.size());
        for (int64_t c = 0; c < cuda::RetentionChunkCount(len[s]); ++c)
          chunks.push_back({static_cast<int32_t>(chunk.size()), static_cast<int32_t>(c)});
        chunk.push_back({begin[s], len[s], state, first});
      }
      Dev<cuda::RetentionTask> dchunk(chunk), dstep(step);
      Dev<cuda::RetentionChunk> dchunks(chunks);
      const cuda::RetentionShape shape{heads, d, ld};
      auto dscratch = Dev<float>::Poisoned(cuda::RetentionScratchFloats(shape, chunks.size()));
      ASSERT_EQ(cuda::GatedRetentionChunkwise(shape, dchunk.get(), chunk.size(), dchunks.get(),
                                              chunks.size(), dq.get(), dk.get(), dv.get(), dg.get(),
                                              dout.get(), dscratch.get(), nullptr),
                cudaSuccess);
      ASSERT_EQ(cuda::GatedRetentionStep(shape, dstep.get(), step.size(), dq.get(), dk.get(),
                                         dv.get(), dg.get(), dout.get(), nullptr),
                cudaSuccess);
      EXPECT_LE(RelativeError(dout.Get(), want), 2e-5) << "d " << d << " T0 " << T0;
      EXPECT_LE(RelativeError(ds.Get(), want_state), 2e-5) << "d " << d << " T0 " << T0;
    }
  }
}

// Decode-style queries of different lengths over a sequence's K/V (GQA), against the CPU's
// flash-decoding kernel; long enough for several key ranges per query.
TEST_F(CudaKernelTest, AttentionOverSharedKvMatchesCpu) {
  for (auto [q_heads, kv_heads, d] : {std::tuple{4, 2, 32}, {24, 8, 128}, {6, 6, 16}}) {
    const int64_t n_max = 5000;
    const int64_t kv_ld = int64_t{kv_heads} * d;
    const int64_t q_ld = int64_t{q_heads} * d;
    const auto keys = RandomFloats(n_max * kv_ld, 20 + d);
    const auto values = RandomFloats(n_max * kv_ld, 21 + d);
    const std::vector<int64_t> lengths = {1, 31, 33, 700, n_max};
    const int64_t Q = lengths.size();
    const auto q = RandomFloats(Q * q_ld, 22 + d, -2.0f, 2.0f);
    std::vector<float> want(Q * q_ld);
    std::vector<cpu::DecodeQuery> cq;
    for (int64_t i = 0; i < Q; ++i)
      cq.push_back(
          {q.data() + i * q_ld, keys.data(), values.data(), lengths[i], want.data() + i * q_ld});
    cpu::DecodeAttentionScratch scratch;
    cpu::DecodeAttention({q_heads, kv_heads, d}, cq.data(), Q, &scratch);

    Dev<float> dk(keys), dv(values), dq(q);
    auto dout = Dev<float>::Poisoned(Q * q_ld);
    std::vector<cuda::AttentionQuery> queries;
    for (int64_t i = 0; i < Q; ++i) {
      cuda::AttentionQuery a;
      a.row = i;
      a.n = lengths[i];
      a.old_keys = dk.get();
      a.old_values = dv.get();
      a.split = INT64_MAX;
      queries.push_back(a);
    }
    Dev<cuda::AttentionQuery> dqueries(queries);
    const cuda::AttentionShape shape{q_heads, kv_heads, d, q_ld, kv_ld};
    auto scratch_dev =
        Dev<float>::Poisoned(cuda::AttentionScratchFloats(shape, Q, n_max, sm_count_));
    ASSERT_EQ(cuda::Attention(shape, dqueries.get(), Q, n_max, dq.get(), dout.get(),
                              scratch_dev.get(), sm_count_, nullptr),
              cudaSuccess);
    EXPECT_LE(RelativeError(dout.Get(), want), 1e-5) << q_heads << "/" << kv_heads << "/" << d;
  }
}

// The SWA form: queries of a segment over the ring of older rows plus the segment's own rows,
// then the ring update, against the CPU kernel over the same calls.
TEST_F(CudaKernelTest, SlidingWindowMatchesCpu) {
  const int heads = 2, d = 32;
  const int64_t D = heads * d;
  for (int64_t W : {8, 64}) {
    std::vector<float> ring_k(W * D, 0.0f), ring_v(W * D, 0.0f);
    Dev<float> dring_k(ring_k), dring_v(ring_v);
    int64_t p0 = 0;
    for (int64_t T : {5, 1, 70, 1, 3}) {
      const auto q = RandomFloats(T * D, 30 + p0);
      const auto k = RandomFloats(T * D, 31 + p0);
      const auto v = RandomFloats(T * D, 32 + p0);
      std::vector<float> want(T * D);
      cpu::SlidingWindowScratch scratch;
      cpu::SlidingWindowAttention({heads, d, W}, p0, T, q.data(), k.data(), v.data(), ring_k.data(),
                                  ring_v.data(), want.data(), &scratch);
      Dev<float> dq(q), dk(k), dv(v);
      auto dout = Dev<float>::Poisoned(T * D);
      std::vector<cuda::AttentionQuery> queries;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = p0 + t;
        cuda::AttentionQuery a;
        a.row = t;
        a.first = std::max<int64_t>(0, p - W + 1);
        a.n = p - a.first + 1;
        a.old_keys = dring_k.get();
        a.old_values = dring_v.get();
        a.ring = W;
        a.split = p0;
        a.new_keys = dk.get();
        a.new_values = dv.get();
        queries.push_back(a);
      }
      Dev<cuda::AttentionQuery> dqueries(queries);
      const cuda::AttentionShape shape{heads, heads, d, D, D};
      auto scratch_dev = Dev<float>::Poisoned(cuda::AttentionScratchFloats(shape, T, W, sm_count_));
      ASSERT_EQ(cuda::Attention(shape, dqueries.get(), T, W, dq.get(), dout.get(),
                                scratch_dev.get(), sm_count_, nullptr),
                cudaSuccess);
      const int64_t t0 = std::max<int64_t>(0, T - W);
      Dev<cuda::RowCopy> copies(
          std::vector<cuda::RowCopy>{{dk.get() + t0 * D, dring_k.get(), T - t0, p0 + t0, W},
                                     {dv.get() + t0 * D, dring_v.get(), T - t0, p0 + t0, W}});
      ASSERT_EQ(cuda::CopyRows(copies.get(), 2, T - t0, D, nullptr), cudaSuccess);
      EXPECT_LE(RelativeError(dout.Get(), want), 1e-5) << "W " << W << " p0 " << p0;
      EXPECT_EQ(dring_k.Get(), ring_k);
      EXPECT_EQ(dring_v.Get(), ring_v);
      p0 += T;
    }
  }
}

// The linear layer: fp32 weights in fp32; bf16 weights on fp32 activations for decode-sized
// batches (Bf16Gemv, the CPU's arithmetic) and on bf16-rounded activations beyond (the tensor
// cores), which the CPU kernel given the same rounded activations computes exactly but for
// summation order. Widths past one 1024-column chunk of the GEMV, with a tail.
TEST_F(CudaKernelTest, LinearMatchesCpu) {
  auto cublas = CublasLibrary::Get();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  cublasHandle_t blas;
  ASSERT_EQ((*cublas)->create(&blas), CUBLAS_STATUS_SUCCESS);
  const int64_t out = 129;
  for (auto [m, in] : {std::pair<int64_t, int64_t>{37, 200}, {1, 2056}, {5, 200}, {8, 2056}}) {
    const auto x = RandomFloats(m * in, 40);
    const auto w = RandomFloats(out * in, 41);
    const auto y0 = RandomFloats(m * out, 42);
    std::vector<uint16_t> w16(out * in);
    for (size_t i = 0; i < w.size(); ++i) w16[i] = FloatToBf16(w[i]);
    std::vector<float> x_rounded = x;
    for (float& f : x_rounded) f = Bf16ToFloat(FloatToBf16(f));
    for (bool bf16 : {false, true}) {
      for (bool accumulate : {false, true}) {
        cpu::WeightMatrix cw{bf16 ? static_cast<const void*>(w16.data()) : w.data(),
                             bf16 ? cpu::WeightType::kBF16 : cpu::WeightType::kF32, out, in, false};
        const bool rounded = bf16 && m > cuda::kMaxGemvRows;
        std::vector<float> want = y0, wide;
        cpu::Linear(rounded ? x_rounded.data() : x.data(), m, cw, want.data(), accumulate, &wide);
        DeviceMatrix dw;
        dw.bf16 = bf16;
        dw.rows = out;
        dw.cols = in;
        ASSERT_TRUE(dw.data.Reserve(cw.bytes()).ok());
        cudaMemcpy(dw.data.get(), cw.data, cw.bytes(), cudaMemcpyHostToDevice);
        Dev<float> dx(x), dy(y0);
        DeviceBuffer xb;
        ASSERT_TRUE(DeviceLinear(blas, nullptr, dx.get(), m, dw, dy.get(), accumulate, &xb).ok());
        EXPECT_LE(RelativeError(dy.Get(), want), 1e-5)
            << "m " << m << " in " << in << " bf16 " << bf16 << " acc " << accumulate;
      }
    }
  }
  (*cublas)->destroy(blas);
}

// Several matrices in one GEMV launch: each output is the bits of its own Bf16Gemv and within the
// CPU kernel's tolerance, with row counts that leave partial blocks (and one matrix with none).
TEST_F(CudaKernelTest, FusedGemvMatchesSeparateGemvs) {
  const std::vector<int64_t> rows = {13, 129, 6, 0, 64};
  for (auto [m, in] : {std::pair<int, int64_t>{1, 2056}, {4, 200}, {8, 2056}}) {
    const auto x = RandomFloats(m * in, 50);
    Dev<float> dx(x);
    std::vector<std::vector<uint16_t>> w16;
    std::vector<Dev<uint16_t>> dw;
    std::vector<std::vector<float>> y0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto w = RandomFloats(rows[i] * in, 51 + i);
      w16.emplace_back(w.size());
      for (size_t j = 0; j < w.size(); ++j) w16.back()[j] = FloatToBf16(w[j]);
      dw.emplace_back(w16.back());
      y0.push_back(RandomFloats(m * rows[i], 60 + i));
    }
    for (bool accumulate : {false, true}) {
      std::vector<Dev<float>> separate, fused;
      std::vector<cuda::Bf16GemvOutput> outputs;
      for (size_t i = 0; i < rows.size(); ++i) {
        separate.emplace_back(y0[i]);
        fused.emplace_back(y0[i]);
        const auto* w = reinterpret_cast<const __nv_bfloat16*>(dw[i].get());
        ASSERT_EQ(
            cuda::Bf16Gemv(w, rows[i], in, dx.get(), m, separate.back().get(), accumulate, nullptr),
            cudaSuccess);
        outputs.push_back({w, rows[i], fused.back().get()});
      }
      ASSERT_EQ(cuda::Bf16GemvFused(outputs.data(), static_cast<int>(outputs.size()), in, dx.get(),
                                    m, accumulate, nullptr),
                cudaSuccess);
      for (size_t i = 0; i < rows.size(); ++i) {
        const std::vector<float> got = fused[i].Get();
        EXPECT_EQ(got, separate[i].Get()) << "matrix " << i << " m " << m << " acc " << accumulate;
        if (rows[i] == 0) continue;
        std::vector<float> want = y0[i], wide;
        const cpu::WeightMatrix cw{w16[i].data(), cpu::WeightType::kBF16, rows[i], in, false};
        cpu::Linear(x.data(), m, cw, want.data(), accumulate, &wide);
        EXPECT_LE(RelativeError(got, want), 1e-5) << "matrix " << i;
      }
    }
  }
}

TEST_F(CudaKernelTest, FusedGemvRefusesBadShapes) {
  Dev<float> x(std::vector<float>(16, 1.0f)), y(std::vector<float>(16, 0.0f));
  Dev<uint16_t> w(std::vector<uint16_t>(16, 0));
  const auto* wp = reinterpret_cast<const __nv_bfloat16*>(w.get());
  std::vector<cuda::Bf16GemvOutput> outputs(cuda::kMaxFusedGemvs + 1, {wp, 1, y.get()});
  EXPECT_EQ(cuda::Bf16GemvFused(outputs.data(), 0, 16, x.get(), 1, false, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      cuda::Bf16GemvFused(outputs.data(), cuda::kMaxFusedGemvs + 1, 16, x.get(), 1, false, nullptr),
      cudaErrorInvalidValue);
  EXPECT_EQ(cuda::Bf16GemvFused(outputs.data(), 1, 12, x.get(), 1, false, nullptr),
            cudaErrorInvalidValue);  // not whole 16-byte loads
  EXPECT_EQ(
      cuda::Bf16GemvFused(outputs.data(), 1, 16, x.get(), cuda::kMaxGemvRows + 1, false, nullptr),
      cudaErrorInvalidValue);
  EXPECT_EQ(
      cuda::Bf16GemvFused(outputs.data(), cuda::kMaxFusedGemvs, 16, x.get(), 1, false, nullptr),
      cudaSuccess);
}

// DeviceLinearFused gives each output DeviceLinear's bits: all fused (bf16, decode-sized), the
// bf16 ones fused around an fp32 matrix that runs alone, or none (the tensor-core batch).
TEST_F(CudaKernelTest, LinearFusedMatchesSeparateLinears) {
  auto cublas = CublasLibrary::Get();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  cublasHandle_t blas;
  ASSERT_EQ((*cublas)->create(&blas), CUBLAS_STATUS_SUCCESS);
  const int64_t in = 2056;
  for (int64_t m : {1, 5, 37}) {
    for (bool with_f32 : {false, true}) {
      const auto x = RandomFloats(m * in, 70);
      Dev<float> dx(x);
      const std::vector<int64_t> rows = {129, 40, 24};
      std::vector<DeviceMatrix> matrices(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto w = RandomFloats(rows[i] * in, 71 + i);
        DeviceMatrix& dm = matrices[i];
        dm.bf16 = !(with_f32 && i == 1);
        dm.rows = rows[i];
        dm.cols = in;
        std::vector<uint16_t> w16(w.size());
        for (size_t j = 0; j < w.size(); ++j) w16[j] = FloatToBf16(w[j]);
        const void* src = dm.bf16 ? static_cast<const void*>(w16.data()) : w.data();
        const size_t bytes = w.size() * (dm.bf16 ? sizeof(uint16_t) : sizeof(float));
        ASSERT_TRUE(dm.data.Reserve(bytes).ok());
        cudaMemcpy(dm.data.get(), src, bytes, cudaMemcpyHostToDevice);
      }
      std::vector<Dev<float>> separate, fused;
      std::vector<DeviceLinearOutput> outputs;
      DeviceBuffer xb;
      for (size_t i = 0; i < rows.size(); ++i) {
        separate.push_back(Dev<float>::Poisoned(m * rows[i]));
        fused.push_back(Dev<float>::Poisoned(m * rows[i]));
        ASSERT_TRUE(
            DeviceLinear(blas, nullptr, dx.get(), m, matrices[i], separate.back().get(), false, &xb)
                .ok());
        outputs.push_back({&matrices[i], fused.back().get()});
      }
      ASSERT_TRUE(DeviceLinearFused(blas, nullptr, dx.get(), m, outputs, &xb).ok());
      for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(fused[i].Get(), separate[i].Get())
            << "matrix " << i << " m " << m << " with f32 " << with_f32;
      }
    }
  }
  (*cublas)->destroy(blas);
}

}  // namespace
}  // namespace yoco
