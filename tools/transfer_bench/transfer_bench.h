// The transfer benchmark behind yoco-transfer-bench: one process sends buffers to a receiver
// process over UcxTransport and measures bandwidth and per-transfer latency (send to
// acknowledgement), optionally next to UCX's own ucx_perftest for the same transport and size.
#ifndef YOCO_TOOLS_TRANSFER_BENCH_TRANSFER_BENCH_H_
#define YOCO_TOOLS_TRANSFER_BENCH_TRANSFER_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace yoco {

struct TransferBenchOptions {
  std::string tls = "tcp";
  uint64_t size = 64 << 20;
  int count = 20;
  bool checksum = false;  // the transport's own CRC (bundles carry theirs)
  bool perftest = false;  // also run ucx_perftest ucp_am_bw for the same tls and size
  // The receiver takes each transfer into segments of this many bytes (as a decode worker takes
  // a bundle part into its K/V chunks); 0: one buffer.
  uint64_t receive_segment_bytes = 0;
  std::string self_path;  // this executable, re-run as the receiver
};

struct TransferBenchResult {
  std::string tls;
  uint64_t size = 0;
  double gbps = 0;  // GB/s (1e9 bytes) over the timed transfers
  double p50_ms = 0, p99_ms = 0;
  double perftest_gbps = 0;  // 0 when not run
};

// Runs the receiver side: prints the worker address (hex) on stdout, then serves until it is
// terminated (or its parent exits).
int ServeTransfers(const std::string& tls, uint64_t segment_bytes);

absl::StatusOr<TransferBenchResult> RunTransferBench(const TransferBenchOptions& options);

std::string ToJson(const TransferBenchResult& result);

}  // namespace yoco

#endif  // YOCO_TOOLS_TRANSFER_BENCH_TRANSFER_BENCH_H_
