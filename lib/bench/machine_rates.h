// The machine's own rates, measured in the benchmark's process so its ratios are fair on a
// shared, noisy machine: the BLAS fp32 rate and a streaming read bandwidth.
#ifndef YOCO_LIB_BENCH_MACHINE_RATES_H_
#define YOCO_LIB_BENCH_MACHINE_RATES_H_

#include <cstdint>

namespace yoco {

// GFLOP/s of a 2048x2048x2048 sgemm on the kernel threads (best of a few runs).
double MeasureSgemmGflops();

// GB/s of reading a buffer of `bytes` with every kernel thread (best of `passes`).
double MeasureReadBandwidthGbs(int64_t bytes = int64_t{1} << 30, int passes = 5);

}  // namespace yoco

#endif  // YOCO_LIB_BENCH_MACHINE_RATES_H_
