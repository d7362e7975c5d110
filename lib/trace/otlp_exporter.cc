// The exporter's thread: wakes when a batch is full, a flush is asked for, or the interval
// passes, and sends what is queued in batches of at most max_batch.
#include "lib/trace/otlp_exporter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/log/log.h"

namespace yoco {

absl::StatusOr<std::shared_ptr<OtlpExporter>> OtlpExporter::Create(OtlpExporterOptions options) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(options.endpoint);
  if (!url.ok()) return url.status();
  return std::shared_ptr<OtlpExporter>(new OtlpExporter(std::move(options), *std::move(url)));
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, HttpUrl url)
    : options_(std::move(options)), url_(std::move(url)) {
  thread_ = std::thread([this] { Run(); });
}

OtlpExporter::~OtlpExporter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void OtlpExporter::Export(SpanData span) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= options_.max_queue) {
    ++stats_.dropped;
    return;
  }
  queue_.push_back(std::move(span));
}

void OtlpExporter::Flush() {
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = ++flush_requests_;
  auto done = [this, ticket]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return flushes_done_ >= ticket; };
  mu_.Await(absl::Condition(&done));
}

OtlpExporterStats OtlpExporter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

std::vector<SpanData> OtlpExporter::TakeBatch() {
  absl::MutexLock lock(&mu_);
  const size_t n = std::min(queue_.size(), options_.max_batch);
  std::vector<SpanData> batch(std::make_move_iterator(queue_.begin()),
                              std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
  return batch;
}

void OtlpExporter::Run() {
  absl::Time next_flush = absl::Now() + options_.flush_interval;
  while (true) {
    uint64_t flush_ticket = 0;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || flush_requests_ > flushes_done_ || queue_.size() >= options_.max_batch;
      };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next_flush);
      flush_ticket = flush_requests_;
      stop = stopping_;
    }
    // What is queued now goes, a batch at a time, before the flush counts as done; on the way
    // out, only while the collector answers (one timeout at most spent on a dead one).
    while (true) {
      std::vector<SpanData> batch = TakeBatch();
      const size_t n = batch.size();
      if (n == 0) break;
      if (!Send(std::move(batch)) && stop) break;
      if (n < options_.max_batch) break;
    }
    {
      absl::MutexLock lock(&mu_);
      flushes_done_ = std::max(flushes_done_, flush_ticket);
    }
    if (stop) return;
    if (absl::Now() >= next_flush) next_flush = absl::Now() + options_.flush_interval;
  }
}

bool OtlpExporter::Send(std::vector<SpanData> batch) {
  const std::string body = EncodeOtlpTraces(options_.resource, batch);
  absl::StatusOr<int> code = PostHttp(url_, "application/x-protobuf", body, options_.timeout);
  const bool ok = code.ok() && *code >= 200 && *code < 300;
  {
    absl::MutexLock lock(&mu_);
    (ok ? stats_.exported : stats_.failed) += batch.size();
  }
  if (!ok) {
    static LogRateLimit limit(1, absl::Minutes(1));
    uint64_t held_back = 0;
    if (limit.Allow(&held_back)) {
      LogWarning("trace export failed")
          .With("endpoint", options_.endpoint)
          .With("spans", static_cast<uint64_t>(batch.size()))
          .With("error",
                code.ok() ? absl::StrCat("HTTP ", *code) : std::string(code.status().message()))
          .HeldBack(held_back);
    }
  }
  return ok;
}

}  // namespace yoco
