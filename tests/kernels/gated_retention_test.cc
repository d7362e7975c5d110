// Chunkwise and recurrent gated retention against the double-precision parallel form.
#include "kernels/cpu/gated_retention.h"

#include <gtest/gtest.h>

#include "kernels/cpu/activation.h"
#include "tests/kernels/random_inputs.h"
#include "tests/reference/reference_math.h"

namespace yoco {
namespace {

using testing::Compare;
using testing::RandomFloats;
using testing::ToMat;

// Two heads of dimension d side by side, as the backend lays them out ([T, 2d] rows).
struct Inputs {
  int64_t T;
  int d;
  int64_t ld;
  std::vector<float> q, k, v, log_decay, state;  // log_decay [T, 2]; state [2, d, d]
};

Inputs MakeInputs(int64_t T, int d, uint32_t seed, bool nonzero_state) {
  Inputs in{T, d, 2LL * d, {}, {}, {}, {}, {}};
  in.q = RandomFloats(T * in.ld, seed);
  in.k = RandomFloats(T * in.ld, seed + 1, -1.0f / std::sqrt(static_cast<float>(d)),
                      1.0f / std::sqrt(static_cast<float>(d)));
  in.v = RandomFloats(T * in.ld, seed + 2);
  in.log_decay = RandomFloats(T * 2, seed + 3, -6.0f, 6.0f);
  for (float& x : in.log_decay) x = cpu::LogSigmoid(x) / 16.0f;
  in.state =
      nonzero_state ? RandomFloats(2LL * d * d, seed + 4) : std::vector<float>(2LL * d * d, 0.0f);
  return in;
}

reference::Mat ReferenceHead(const Inputs& in, int head, reference::Mat* final_state) {
  std::vector<double> decay(in.T);
  for (int64_t t = 0; t < in.T; ++t) decay[t] = in.log_decay[t * 2 + head];
  const reference::Mat s0 = ToMat(in.state.data() + int64_t{head} * in.d * in.d, in.d, in.d, in.d);
  return reference::GatedRetentionParallel(ToMat(in.q.data(), in.T, in.d, in.ld, head * in.d),
                                           ToMat(in.k.data(), in.T, in.d, in.ld, head * in.d),
                                           ToMat(in.v.data(), in.T, in.d, in.ld, head * in.d),
                                           decay, s0, final_state);
}

struct ChunkCase {
  int64_t T;
  int chunk;
  bool nonzero_state;
};

class ChunkwiseTest : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(ChunkwiseTest, MatchesParallelFormAndFinalState) {
  const ChunkCase c = GetParam();
  const int d = 64;
  Inputs in = MakeInputs(c.T, d, 1000 + static_cast<uint32_t>(c.T), c.nonzero_state);
  std::vector<float> out(c.T * in.ld, 0.0f);
  std::vector<float> scratch(cpu::GatedRetentionScratchFloats(c.chunk, d));
  std::vector<float> state = in.state;
  for (int head = 0; head < 2; ++head) {
    cpu::GatedRetentionChunkwise(c.T, d, in.q.data() + head * d, in.k.data() + head * d,
                                 in.v.data() + head * d, in.ld, in.log_decay.data() + head, 2,
                                 state.data() + int64_t{head} * d * d, out.data() + head * d, in.ld,
                                 c.chunk, scratch.data());
  }
  for (int head = 0; head < 2; ++head) {
    reference::Mat final_state;
    const reference::Mat want = ReferenceHead(in, head, &final_state);
    const auto e = Compare(out.data(), in.ld, head * d, want);
    EXPECT_LT(e.max_abs_error, 2e-5 * std::max(1.0, e.max_abs_reference)) << "head " << head;
    const auto es = Compare(state.data() + int64_t{head} * d * d, d, 0, final_state);
    EXPECT_LT(es.max_abs_error, 2e-5 * std::max(1.0, es.max_abs_reference))
        << "state, head " << head;
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, ChunkwiseTest,
                         ::testing::Values(ChunkCase{1, 256, false}, ChunkCase{37, 256, false},
                                           ChunkCase{256, 256, false}, ChunkCase{300, 256, false},
                                           ChunkCase{600, 256, true}, ChunkCase{129, 64, true},
                                           ChunkCase{513, 256, true}));

// Head dims that take every column path of the step: 8 register blocks of 16 (128), fewer (64,
// 80), both (144), and columns after the last block of 16 (24, 136, 7).
class GatedRetentionStepTest : public ::testing::TestWithParam<int> {};

TEST_P(GatedRetentionStepTest, RecurrentStepsMatchParallelForm) {
  const int d = GetParam();
  const int64_t T = 70;
  Inputs in = MakeInputs(T, d, 77 + d, /*nonzero_state=*/true);
  std::vector<float> state = in.state;
  std::vector<float> out(T * in.ld);
  for (int64_t t = 0; t < T; ++t) {
    for (int head = 0; head < 2; ++head) {
      const int64_t off = t * in.ld + head * d;
      cpu::GatedRetentionStep(d, in.q.data() + off, in.k.data() + off, in.v.data() + off,
                              in.log_decay[t * 2 + head], state.data() + int64_t{head} * d * d,
                              out.data() + off);
    }
  }
  for (int head = 0; head < 2; ++head) {
    reference::Mat final_state;
    const reference::Mat want = ReferenceHead(in, head, &final_state);
    EXPECT_LT(Compare(out.data(), in.ld, head * d, want).max_abs_error, 2e-5);
    EXPECT_LT(Compare(state.data() + int64_t{head} * d * d, d, 0, final_state).max_abs_error, 2e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, GatedRetentionStepTest,
                         ::testing::Values(7, 24, 64, 80, 128, 136, 144));

TEST(GatedRetentionTest, ChunkwiseThenRecurrentEqualsOneChunkwisePass) {
  // A prefill followed by decode steps must give what one pass over all tokens gives.
  const int d = 64;
  const int64_t T = 300, split = 261;
  Inputs in = MakeInputs(T, d, 5, /*nonzero_state=*/false);
  std::vector<float> scratch(cpu::GatedRetentionScratchFloats(256, d));
  std::vector<float> full(T * in.ld), mixed(T * in.ld);
  std::vector<float> s_full(d * d, 0.0f), s_mixed(d * d, 0.0f);
  cpu::GatedRetentionChunkwise(T, d, in.q.data(), in.k.data(), in.v.data(), in.ld,
                               in.log_decay.data(), 2, s_full.data(), full.data(), in.ld, 256,
                               scratch.data());
  cpu::GatedRetentionChunkwise(split, d, in.q.data(), in.k.data(), in.v.data(), in.ld,
                               in.log_decay.data(), 2, s_mixed.data(), mixed.data(), in.ld, 256,
                               scratch.data());
  for (int64_t t = split; t < T; ++t) {
    const int64_t off = t * in.ld;
    cpu::GatedRetentionStep(d, in.q.data() + off, in.k.data() + off, in.v.data() + off,
                            in.log_decay[t * 2], s_mixed.data(), mixed.data() + off);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int j = 0; j < d; ++j) ASSERT_NEAR(full[t * in.ld + j], mixed[t * in.ld + j], 2e-5) << t;
  for (int i = 0; i < d * d; ++i) ASSERT_NEAR(s_full[i], s_mixed[i], 2e-5);
}

}  // namespace
}  // namespace yoco
