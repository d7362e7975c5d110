// SplitMix64: a small, portable random generator for seeded tools (workloads, evaluation
// sets). std's distributions differ between standard libraries; this one gives the same
// draws everywhere, so a seed names the same run on every machine.
#ifndef YOCO_LIB_RANDOM_SPLIT_MIX64_H_
#define YOCO_LIB_RANDOM_SPLIT_MIX64_H_

#include <cstdint>

namespace yoco {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform();            // [0, 1)
  uint64_t Below(uint64_t n);  // [0, n)
 private:
  uint64_t state_;
};

}  // namespace yoco

#endif  // YOCO_LIB_RANDOM_SPLIT_MIX64_H_
