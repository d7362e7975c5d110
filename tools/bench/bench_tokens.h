// Deterministic token streams for the benchmarks: their speed does not depend on the ids, only
// on how many there are, so a fast xorshift over the non-special ids [4, vocab) will do.
#ifndef YOCO_TOOLS_BENCH_BENCH_TOKENS_H_
#define YOCO_TOOLS_BENCH_BENCH_TOKENS_H_

#include <cstdint>
#include <vector>

namespace yoco {

// `n` ids in [4, vocab) from the xorshift64 sequence that starts at `state` (non-zero).
inline std::vector<int32_t> BenchTokens(int64_t n, int vocab, uint64_t state) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    t[i] = 4 + static_cast<int32_t>(state % static_cast<uint64_t>(vocab - 4));
  }
  return t;
}

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_BENCH_TOKENS_H_
