// The machine's own rates, measured in the benchmark's process so its ratios are fair on a
// shared, noisy machine: the BLAS fp32 rate and a streaming read bandwidth.
#ifndef YOCO_LIB_BENCH_MACHINE_RATES_H_
#define YOCO_LIB_BENCH_MACHINE_RATES_H_

namespace yoco {

// GFLOP/s of a 2048x2048x2048 sgemm on the kernel threads (best of a few runs).
double MeasureSgemmGflops();

// GB/s of reading a 1 GiB buffer with every kernel thread (best of a few passes).
double MeasureReadBandwidthGbs();

}  // namespace yoco

#endif  // YOCO_LIB_BENCH_MACHINE_RATES_H_
