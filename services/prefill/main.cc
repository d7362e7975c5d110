// yoco-prefill: the prefill worker. Flags, wiring, run.
#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "lib/engine/backend_choice.h"
#include "lib/files/key_file.h"
#include "lib/log/log.h"
#include "lib/metrics/load_signals_export.h"
#include "lib/metrics/metrics_server.h"
#include "lib/metrics/snapshot_store_export.h"
#include "lib/metrics/transfer_metrics_export.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/heap_retention.h"
#include "lib/rpc/service_flags.h"
#include "lib/workers/prefill_worker.h"
#include "services/prefill/prefill_service.h"
#include "services/worker/worker_startup.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50061", "gRPC address HOST:PORT");
ABSL_FLAG(int64_t, cache_mb, 1024, "prefix-cache memory in MiB (0: no prefix cache)");
ABSL_FLAG(std::string, cache_dir, "",
          "prefix-cache disk tier: a folder for snapshot files that survive restarts (empty: "
          "memory only)");
ABSL_FLAG(int64_t, cache_disk_mb, 8192, "prefix-cache disk tier size in MiB");
ABSL_FLAG(std::string, cache_key_file, "",
          "the cluster's cache key (a file of 16-4096 bytes, e.g. a mounted Secret): snapshot "
          "files and snapshot copies carry its tag and are refused without it, so whoever can "
          "write the cache volume cannot change answers (empty: integrity checks only)");
ABSL_FLAG(int, max_queue, 32,
          "prefills waiting for the engine before RESOURCE_EXHAUSTED (readiness turns "
          "NOT_SERVING at this bound)");
ABSL_FLAG(int64_t, transfer_buffer_mb, 1024,
          "idle memory kept for serialising bundles, MiB: memory touched once is reused, which "
          "in a virtual machine makes shipping a long document several times faster");
ABSL_FLAG(bool, prefault, false,
          "touch --transfer-buffer-mb of bundle buffer at start: in a virtual machine the first "
          "touch of fresh pages costs more than shipping a long document");
ABSL_FLAG(int64_t, bundle_part_mb, 64,
          "a bundle with more K/V than this (MiB) ships as parts of at most this size ahead of "
          "the rest: no worker needs a buffer of the whole bundle, and serialising, the wire and "
          "parsing overlap (0: bundles go whole)");
ABSL_FLAG(int, snapshot_every_blocks, 16,
          "also snapshot every this many 128-token blocks of long prompts (0: only at the last "
          "full block)");

int main(int argc, char** argv) {
  yoco::RetainFreedHeapMemory();
  yoco::BlockTerminationSignals();
  yoco::ParseServiceFlags(argc, argv,
                          "the prefill worker (prefix cache, state bundles over "
                          "UCX).\nusage: yoco-prefill --model DIR [flags] (or --flagfile=FILE)");
  yoco::WorkerBase base = yoco::WorkerBaseFromFlagsOrExit();
  yoco::PrefillWorkerOptions options;
  options.structured_output = base.structured_output;
  options.cache_budget_bytes = absl::GetFlag(FLAGS_cache_mb) << 20;
  options.snapshot_every_blocks = absl::GetFlag(FLAGS_snapshot_every_blocks);
  options.max_waiting = absl::GetFlag(FLAGS_max_queue);
  options.transfer_buffer_keep_bytes = absl::GetFlag(FLAGS_transfer_buffer_mb) << 20;
  options.prefault = absl::GetFlag(FLAGS_prefault);
  if (const int64_t mb = absl::GetFlag(FLAGS_bundle_part_mb); mb < 0 || mb > 4096) {
    yoco::LogError(absl::StrCat("--bundle-part-mb ", mb, " is not in [0, 4096]"));
    return 2;
  }
  options.bundle_part_bytes = absl::GetFlag(FLAGS_bundle_part_mb) << 20;
  options.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  options.cache_disk_budget_bytes = absl::GetFlag(FLAGS_cache_disk_mb) << 20;
  if (const std::string path = absl::GetFlag(FLAGS_cache_key_file); !path.empty()) {
    absl::StatusOr<std::string> key = yoco::ReadKeyFile(path, "cache key");
    if (!key.ok()) {
      yoco::LogError(key.status().message());
      return 1;
    }
    options.cache_key = std::move(*key);
  }
  // Prefill states leave as bundles and snapshots, so they stay current in host memory (the
  // default): no lazy_host_states here.
  auto backend = yoco::MakeBackend(base.model, base.backend);
  if (!backend.ok()) {
    yoco::LogError(backend.status().message());
    return 1;
  }
  const std::string backend_description = yoco::DescribeBackend(**backend);
  auto created = yoco::PrefillWorker::Create(std::move(*backend), base.transport, options);
  if (!created.ok()) {
    yoco::LogError(created.status().message());
    return 1;
  }
  yoco::PrefillWorker& worker = **created;
  for (const yoco::DiscardedSnapshot& d : worker.discarded_at_start()) {
    yoco::LogWarning("discarded snapshot").With("key", d.key.Hex()).With("why", d.reason.message());
  }
  yoco::PrefillService service(worker, absl::GetFlag(FLAGS_listen), backend_description,
                               std::move(base.callers));
  auto callbacks = std::make_shared<yoco::ScrapeCallbacks>();
  callbacks->Add("yoco_prefill_active_requests", "Prefills running or waiting for the engine",
                 yoco::ScrapeCallbacks::Type::kGauge,
                 [&service] { return static_cast<double>(service.active_requests()); });
  callbacks->Add("yoco_prefill_cancelled_total",
                 "Prefills stopped because their call was cancelled or timed out",
                 yoco::ScrapeCallbacks::Type::kCounter,
                 [&service] { return static_cast<double>(service.cancelled_requests()); });
  callbacks->Add("yoco_prefill_queue_refused_total",
                 "Prefills refused with RESOURCE_EXHAUSTED because --max-queue already waited",
                 yoco::ScrapeCallbacks::Type::kCounter,
                 [&worker] { return static_cast<double>(worker.engine_refused()); });
  callbacks->Add("yoco_prefill_engine_yields_total",
                 "Times a pre-cache or prefill let a higher priority use the engine between blocks "
                 "(a conversation's snapshot runs behind every request)",
                 yoco::ScrapeCallbacks::Type::kCounter,
                 [&worker] { return static_cast<double>(worker.engine_yields()); });
  callbacks->Add("yoco_prefill_bundle_buffer_idle_bytes",
                 "Memory kept for the next bundles (bounded by --transfer-buffer-mb)",
                 yoco::ScrapeCallbacks::Type::kGauge, [&worker] {
                   return static_cast<double>(worker.bundle_buffer_stats().kept_bytes);
                 });
  // One prefill runs on the engine at a time; the other active calls wait for it.
  yoco::ExportLoadSignals(
      {.requests_waiting =
           [&service, &worker] {
             const double active = static_cast<double>(service.active_requests());
             return std::max(0.0, active - (worker.engine_busy() ? 1.0 : 0.0));
           },
       .requests_running = [&worker] { return worker.engine_busy() ? 1.0 : 0.0; },
       .state_memory_utilization =
           [&worker, budget = options.cache_budget_bytes] {
             if (worker.cache() == nullptr || budget <= 0) return 0.0;
             return static_cast<double>(worker.cache()->stats().bytes) /
                    static_cast<double>(budget);
           }},
      yoco::VllmMetricNames(), callbacks.get());
  yoco::ExportTransferMetrics("yoco_prefill", &worker.transport().metrics(), callbacks.get());
  if (worker.cache() != nullptr) {
    yoco::ExportSnapshotStoreMetrics("yoco_prefill_cache", worker.cache(), callbacks.get());
  }
  return yoco::ServeWorker(absl::GetFlag(FLAGS_listen), service,
                           yoco::v1::PrefillWorker::service_full_name(), backend_description,
                           std::move(callbacks), [&worker] { return !worker.engine_queue_full(); });
}
