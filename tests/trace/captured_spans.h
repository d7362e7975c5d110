// CapturedSpans: a SpanSink that keeps every finished span in memory, for tests that check what
// was recorded (set it as a Tracer's sink, or the global tracer's).
#ifndef YOCO_TESTS_TRACE_CAPTURED_SPANS_H_
#define YOCO_TESTS_TRACE_CAPTURED_SPANS_H_

#include <vector>

#include "absl/synchronization/mutex.h"
#include "lib/trace/span.h"

namespace yoco::testing {

class CapturedSpans : public SpanSink {
 public:
  void Export(SpanData span) override {
    absl::MutexLock lock(&mu_);
    spans_.push_back(std::move(span));
  }
  std::vector<SpanData> spans() {
    absl::MutexLock lock(&mu_);
    return spans_;
  }

 private:
  absl::Mutex mu_;
  std::vector<SpanData> spans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace yoco::testing

#endif  // YOCO_TESTS_TRACE_CAPTURED_SPANS_H_
