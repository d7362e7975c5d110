// OtlpExporter: sends finished spans to an OTLP/HTTP endpoint (an OpenTelemetry Collector's
// /v1/traces) in batches from one background thread. A request's thread only appends to a bounded
// queue: when the queue is full the span is dropped and counted, never waited for, and an
// unreachable or failing collector costs a request nothing. A failed batch is dropped (the
// collector in front of the backend does the retrying).
#ifndef YOCO_LIB_TRACE_OTLP_EXPORTER_H_
#define YOCO_LIB_TRACE_OTLP_EXPORTER_H_

#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/trace/http_post.h"
#include "lib/trace/otlp_encoding.h"
#include "lib/trace/span.h"

namespace yoco {

struct OtlpExporterOptions {
  std::string endpoint;  // http://HOST:PORT/v1/traces
  TraceResource resource;
  size_t max_queue = 4096;  // spans waiting; more are dropped
  size_t max_batch = 512;   // spans per POST
  absl::Duration flush_interval = absl::Seconds(1);
  absl::Duration timeout = absl::Seconds(5);  // per POST
};

struct OtlpExporterStats {
  uint64_t exported = 0;  // spans the collector accepted (2xx)
  uint64_t dropped = 0;   // spans the full queue refused
  uint64_t failed = 0;    // spans in batches the collector refused or never got
};

class OtlpExporter final : public SpanSink {
 public:
  // INVALID_ARGUMENT when the endpoint is no http:// URL.
  static absl::StatusOr<std::shared_ptr<OtlpExporter>> Create(OtlpExporterOptions options);
  ~OtlpExporter() override;  // sends what is queued (within one timeout), then stops

  void Export(SpanData span) override;
  // Sends what is queued now and returns when it is sent or failed (tests, shutdown).
  void Flush();
  OtlpExporterStats stats() const;

 private:
  OtlpExporter(OtlpExporterOptions options, HttpUrl url);
  void Run();
  std::vector<SpanData> TakeBatch();  // up to max_batch from the queue's front
  // Sends one batch; mu_ not held. Whether the collector took it.
  bool Send(std::vector<SpanData> batch);

  const OtlpExporterOptions options_;
  const HttpUrl url_;

  mutable absl::Mutex mu_;
  std::deque<SpanData> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t flush_requests_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t flushes_done_ ABSL_GUARDED_BY(mu_) = 0;
  OtlpExporterStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace yoco

#endif  // YOCO_LIB_TRACE_OTLP_EXPORTER_H_
