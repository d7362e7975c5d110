// yoco-prefill: the prefill worker. Flags, wiring, run.
#include <algorithm>
#include <iostream>

#include "absl/flags/flag.h"
#include "lib/auth/allowed_callers_flag.h"
#include "lib/engine/backend_choice.h"
#include "lib/files/key_file.h"
#include "lib/metrics/backend_info_export.h"
#include "lib/metrics/load_signals_export.h"
#include "lib/metrics/metrics_server.h"
#include "lib/metrics/snapshot_store_export.h"
#include "lib/metrics/transfer_metrics_export.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_server.h"
#include "lib/rpc/readiness_reporter.h"
#include "lib/rpc/service_flags.h"
#include "lib/rpc/tls_flags.h"
#include "lib/workers/bundle_transport.h"
#include "lib/workers/prefill_worker.h"
#include "services/prefill/prefill_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50061", "gRPC address HOST:PORT");
ABSL_FLAG(int, drain_seconds, 30,
          "on SIGTERM/SIGINT: how long calls in flight may run before they are cancelled");
ABSL_FLAG(std::string, metrics_listen, "",
          "Prometheus /metrics address HOST:PORT (empty: no metrics endpoint)");
ABSL_FLAG(std::string, model, "", "model folder (params.json + model.safetensors)");
ABSL_FLAG(std::string, weights, "as-stored",
          "how matrices are held: as-stored, f32, bf16 or q8 (8-bit blocks: faster decode, "
          "approximate; prefill and decode workers must agree, bundles carry the choice)");
ABSL_FLAG(std::string, kv_dtype, "f32",
          "how the shared K/V is held: f32 or bf16 (half the bytes per cached token and per "
          "decode step, approximate; prefill and decode workers must agree, bundles and snapshot "
          "files carry the choice)");
ABSL_FLAG(std::string, tls, "tcp", "UCX transports for state bundles: tcp or sm");
ABSL_FLAG(std::string, net_devices, "", "UCX_NET_DEVICES (e.g. lo on loopback)");
ABSL_FLAG(std::string, transport_key_file, "",
          "the cluster's transport key (a file of 16-4096 bytes, e.g. a mounted Secret): workers "
          "connect only to transport addresses sealed with it (empty: addresses are only checked "
          "for integrity)");
ABSL_FLAG(int, threads, 0, "kernel threads (0: one per core)");
ABSL_FLAG(std::string, backend, "cpu", "where the model runs: cpu or cuda");
ABSL_FLAG(int, device, 0, "CUDA device index (with --backend cuda)");
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
ABSL_FLAG(bool, vllm_metric_names, false,
          "also export the load gauges under vLLM's names (vllm:num_requests_waiting, ...)");

int main(int argc, char** argv) {
  yoco::BlockTerminationSignals();
  yoco::ParseServiceFlags(argc, argv,
                          "the prefill worker (prefix cache, state bundles over "
                          "UCX).\nusage: yoco-prefill --model DIR [flags] (or --flagfile=FILE)");
  // Who may call the worker's API is settled before the model loads, so a deployment that
  // leaves it open fails at once.
  auto callers = yoco::AllowedCallersFromFlags(!yoco::TlsFilesFromFlags().ca.empty());
  if (!callers.ok()) {
    std::cerr << "yoco-prefill: " << callers.status().message() << "\n";
    return 2;
  }
  if (callers->admits_everyone()) {
    std::cerr << "yoco-prefill: no mutual TLS: any client that reaches this port can call the "
                 "worker's API (keep it behind the NetworkPolicy, or serve with --tls-ca and "
                 "--allowed-callers)"
              << std::endl;
  }
  auto weights = yoco::ParseWeightFormat(absl::GetFlag(FLAGS_weights));
  if (!weights.ok()) {
    std::cerr << "yoco-prefill: --" << weights.status().message() << "\n";
    return 2;
  }
  auto kv_dtype = yoco::ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) {
    std::cerr << "yoco-prefill: --kv-dtype: " << kv_dtype.status().message() << "\n";
    return 2;
  }
  auto model = yoco::Model::Load(absl::GetFlag(FLAGS_model), *weights, *kv_dtype);
  if (!model.ok()) {
    std::cerr << "yoco-prefill: " << model.status().message() << "\n";
    return 1;
  }
  yoco::PrefillWorkerOptions options;
  options.cache_budget_bytes = absl::GetFlag(FLAGS_cache_mb) << 20;
  options.snapshot_every_blocks = absl::GetFlag(FLAGS_snapshot_every_blocks);
  options.max_waiting = absl::GetFlag(FLAGS_max_queue);
  options.transfer_buffer_keep_bytes = absl::GetFlag(FLAGS_transfer_buffer_mb) << 20;
  options.prefault = absl::GetFlag(FLAGS_prefault);
  if (const int64_t mb = absl::GetFlag(FLAGS_bundle_part_mb); mb < 0 || mb > 4096) {
    std::cerr << "yoco-prefill: --bundle-part-mb " << mb << " is not in [0, 4096]\n";
    return 2;
  }
  options.bundle_part_bytes = absl::GetFlag(FLAGS_bundle_part_mb) << 20;
  options.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  options.cache_disk_budget_bytes = absl::GetFlag(FLAGS_cache_disk_mb) << 20;
  if (const std::string path = absl::GetFlag(FLAGS_cache_key_file); !path.empty()) {
    absl::StatusOr<std::string> key = yoco::ReadKeyFile(path, "cache key");
    if (!key.ok()) {
      std::cerr << "yoco-prefill: " << key.status().message() << "\n";
      return 1;
    }
    options.cache_key = std::move(*key);
  }
  auto transport =
      yoco::BundleTransportOptions(absl::GetFlag(FLAGS_tls), absl::GetFlag(FLAGS_net_devices),
                                   absl::GetFlag(FLAGS_transport_key_file));
  if (!transport.ok()) {
    std::cerr << "yoco-prefill: " << transport.status().message() << "\n";
    return 1;
  }
  auto kind = yoco::ParseBackendKind(absl::GetFlag(FLAGS_backend));
  if (!kind.ok()) {
    std::cerr << "yoco-prefill: " << kind.status().message() << "\n";
    return 2;
  }
  // Prefill states leave as bundles and snapshots, so they stay current in host memory (the
  // default): no lazy_host_states here.
  const yoco::BackendChoice choice{*kind, absl::GetFlag(FLAGS_threads),
                                   absl::GetFlag(FLAGS_device)};
  auto backend = yoco::MakeBackend(*model, choice);
  if (!backend.ok()) {
    std::cerr << "yoco-prefill: " << backend.status().message() << "\n";
    return 1;
  }
  const std::string backend_description = yoco::DescribeBackend(**backend);
  auto created = yoco::PrefillWorker::Create(std::move(*backend), *transport, options);
  if (!created.ok()) {
    std::cerr << "yoco-prefill: " << created.status().message() << "\n";
    return 1;
  }
  yoco::PrefillWorker& worker = **created;
  for (const yoco::DiscardedSnapshot& d : worker.discarded_at_start()) {
    std::cerr << "yoco-prefill: discarded snapshot " << d.key.Hex() << ": " << d.reason.message()
              << "\n";
  }
  yoco::PrefillService service(worker, absl::GetFlag(FLAGS_listen), backend_description,
                               std::move(*callers));
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
      absl::GetFlag(FLAGS_vllm_metric_names), callbacks.get());
  yoco::ExportTransferMetrics("yoco_prefill", &worker.transport().metrics(), callbacks.get());
  if (worker.cache() != nullptr) {
    yoco::ExportSnapshotStoreMetrics("yoco_prefill_cache", worker.cache(), callbacks.get());
  }
  callbacks->Add("yoco_service_draining", "1 from SIGTERM/SIGINT until the service exits",
                 yoco::ScrapeCallbacks::Type::kGauge, [] { return yoco::Draining() ? 1.0 : 0.0; });
  auto registry = std::make_shared<prometheus::Registry>();
  yoco::ExportBackendInfo(*registry, absl::GetFlag(FLAGS_backend), backend_description);
  auto metrics_server =
      yoco::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen), registry, callbacks);
  if (!metrics_server.ok()) {
    std::cerr << "yoco-prefill: " << metrics_server.status().message() << "\n";
    return 1;
  }
  if ((*metrics_server)->port() != 0) {
    std::cerr << "yoco-prefill: metrics on port " << (*metrics_server)->port() << std::endl;
  }
  int port = 0;
  auto credentials = yoco::MakeServerCredentials(yoco::TlsFilesFromFlags());
  if (!credentials.ok()) {
    std::cerr << "yoco-prefill: " << credentials.status().message() << "\n";
    return 1;
  }
  auto server =
      yoco::StartGrpcServer(absl::GetFlag(FLAGS_listen), {&service},
                            yoco::v1::PrefillWorker::service_full_name(), &port, *credentials);
  if (!server.ok()) {
    std::cerr << "yoco-prefill: " << server.status().message() << "\n";
    return 1;
  }
  std::cerr << "yoco-prefill: serving on port " << port << std::endl;
  yoco::ReadinessReporter readiness(**server, yoco::v1::PrefillWorker::service_full_name(),
                                    [&worker] { return !worker.engine_queue_full(); });
  yoco::ServeUntilTerminated(**server, absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)),
                             "yoco-prefill");
  return 0;
}
