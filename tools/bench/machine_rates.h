// The machine's own rates, measured in the benchmark's process so its ratios are fair on a
// shared, noisy machine: the BLAS fp32 rate and a streaming read bandwidth.
#ifndef YOCO_TOOLS_BENCH_MACHINE_RATES_H_
#define YOCO_TOOLS_BENCH_MACHINE_RATES_H_

#include <cstdint>
#include <vector>

#include "lib/engine/huge_page_buffer.h"

namespace yoco {

// GB/s of reading a buffer of `bytes` with every kernel thread (best of `passes`).
double MeasureReadBandwidthGbs(int64_t bytes = int64_t{1} << 30, int passes = 5);

// The probes as objects that keep their buffers, for measurements repeated between timed
// steps. A fresh 256 MB buffer each round had the kernel find, zero and later take back its
// pages, and on the benchmark's VM the first decode step after that ran 5-6x slower at batch 1
// (29 against 5 ms); the sgemm probe's 48 MB are kept for the same reason.
class SgemmProbe {
 public:
  SgemmProbe();
  // GFLOP/s of a 2048x2048x2048 sgemm on the kernel threads (best of a few runs).
  double MeasureGflops();

 private:
  static constexpr int64_t kN = 2048;
  std::vector<float> a_, b_, c_;
};

class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(int64_t bytes);
  double MeasureGbs(int passes) const;

 private:
  HugePageBuffer buffer_;
};

}  // namespace yoco

#endif  // YOCO_TOOLS_BENCH_MACHINE_RATES_H_
