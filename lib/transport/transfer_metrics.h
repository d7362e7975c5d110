// TransferMetrics: what a transport counts, as plain atomics a metrics exporter (Prometheus)
// reads; no dependency on any metrics library here.
#ifndef YOCO_LIB_TRANSPORT_TRANSFER_METRICS_H_
#define YOCO_LIB_TRANSPORT_TRANSFER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/status/status.h"

namespace yoco {

struct TransferMetrics {
  // Completed, acknowledged transfers and their payload bytes.
  std::atomic<uint64_t> transfers_sent{0}, bytes_sent{0};
  std::atomic<uint64_t> transfers_received{0}, bytes_received{0};
  // Failures on either side, by cause.
  std::atomic<uint64_t> failed_deadline{0};   // DEADLINE_EXCEEDED
  std::atomic<uint64_t> failed_cancelled{0};  // CANCELLED (either side)
  std::atomic<uint64_t> failed_peer{0};       // UNAVAILABLE: peer died or unreachable
  std::atomic<uint64_t> failed_refused{
      0};  // the receiver refused the data (checksum, model, memory)
  std::atomic<uint64_t> failed_other{0};
  // Sender-side latency from Send to acknowledgement, bucketed by upper bound in ms.
  static constexpr std::array<double, 12> kLatencyBucketsMs = {0.1, 0.25, 0.5, 1,   2.5,  5,
                                                               10,  25,   50,  100, 1000, 1e30};
  std::array<std::atomic<uint64_t>, kLatencyBucketsMs.size()> latency_ms_buckets{};
  std::atomic<uint64_t> latency_us_total{0};

  void RecordFailure(const absl::Status& status) {
    switch (status.code()) {
      case absl::StatusCode::kDeadlineExceeded:
        ++failed_deadline;
        break;
      case absl::StatusCode::kCancelled:
        ++failed_cancelled;
        break;
      case absl::StatusCode::kUnavailable:
        ++failed_peer;
        break;
      case absl::StatusCode::kDataLoss:
      case absl::StatusCode::kFailedPrecondition:
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kResourceExhausted:
        ++failed_refused;
        break;
      default:
        ++failed_other;
    }
  }

  void RecordLatency(double ms) {
    size_t i = 0;
    while (ms > kLatencyBucketsMs[i]) ++i;
    ++latency_ms_buckets[i];
    latency_us_total += static_cast<uint64_t>(ms * 1000.0);
  }
};

}  // namespace yoco

#endif  // YOCO_LIB_TRANSPORT_TRANSFER_METRICS_H_
