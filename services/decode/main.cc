// yoco-decode: the decode worker. Flags, wiring, run.
#include <iostream>

#include "absl/flags/flag.h"
#include "lib/auth/allowed_callers_flag.h"
#include "lib/engine/backend_choice.h"
#include "lib/metrics/backend_info_export.h"
#include "lib/metrics/load_signals_export.h"
#include "lib/metrics/metrics_server.h"
#include "lib/metrics/transfer_metrics_export.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_server.h"
#include "lib/rpc/readiness_reporter.h"
#include "lib/rpc/service_flags.h"
#include "lib/rpc/tls_flags.h"
#include "lib/workers/bundle_transport.h"
#include "lib/workers/decode_worker.h"
#include "services/decode/decode_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50071", "gRPC address HOST:PORT");
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
ABSL_FLAG(int, max_batch, 32, "sequences per decode step");
ABSL_FLAG(int64_t, memory_budget_mb, 8192, "memory for decoding state of active sequences, MiB");
ABSL_FLAG(int64_t, resident_kv_mb, 1024,
          "shared-K/V chunks of finished sequences kept under their prefix keys, MiB: the next "
          "question on a document is then sent without the document's K/V (0: keep none)");
ABSL_FLAG(int64_t, transfer_buffer_mb, 1024,
          "idle memory kept for receiving bundles, MiB: memory touched once is reused, which "
          "in a virtual machine makes receiving a long document several times faster");
ABSL_FLAG(bool, prefault, false,
          "touch at start the memory bundles will use (--transfer-buffer-mb of receive buffer, "
          "--resident-kv-mb of K/V chunks): in a virtual machine the first touch of fresh pages "
          "costs more than receiving a long document");
ABSL_FLAG(int, max_queue, 256, "sequences waiting for room before RESOURCE_EXHAUSTED");
ABSL_FLAG(bool, local_prefill, true,
          "prefill short uncached prompts here when the router asks (a second engine instance "
          "over the same weights; the router's --local-prefill-max-tokens decides)");
ABSL_FLAG(int, local_prefill_max_tokens, 2048,
          "longest prompt this worker prefills itself; longer local prefills are refused (the "
          "router then ships them)");
ABSL_FLAG(bool, batch_invariant, true,
          "a sequence's tokens do not depend on the batch it is decoded in (a seed reproduces its "
          "tokens under any load); false: past the rows a matrix streams, faster sgemm products "
          "whose rounding depends on the batch's size (CPU backend; the README gives the cost)");
ABSL_FLAG(bool, vllm_metric_names, false,
          "also export the load gauges under vLLM's names (vllm:num_requests_waiting, ...)");

int main(int argc, char** argv) {
  yoco::BlockTerminationSignals();
  yoco::ParseServiceFlags(argc, argv,
                          "the decode worker (continuous batching, token "
                          "streams).\nusage: yoco-decode --model DIR [flags] (or --flagfile=FILE)");
  // Who may call the worker's API is settled before the model loads, so a deployment that
  // leaves it open fails at once.
  auto callers = yoco::AllowedCallersFromFlags(!yoco::TlsFilesFromFlags().ca.empty());
  if (!callers.ok()) {
    std::cerr << "yoco-decode: " << callers.status().message() << "\n";
    return 2;
  }
  if (callers->admits_everyone()) {
    std::cerr << "yoco-decode: no mutual TLS: any client that reaches this port can call the "
                 "worker's API (keep it behind the NetworkPolicy, or serve with --tls-ca and "
                 "--allowed-callers)"
              << std::endl;
  }
  auto weights = yoco::ParseWeightFormat(absl::GetFlag(FLAGS_weights));
  if (!weights.ok()) {
    std::cerr << "yoco-decode: --" << weights.status().message() << "\n";
    return 2;
  }
  auto kv_dtype = yoco::ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) {
    std::cerr << "yoco-decode: --kv-dtype: " << kv_dtype.status().message() << "\n";
    return 2;
  }
  auto model = yoco::Model::Load(absl::GetFlag(FLAGS_model), *weights, *kv_dtype);
  if (!model.ok()) {
    std::cerr << "yoco-decode: " << model.status().message() << "\n";
    return 1;
  }
  yoco::DecodeWorkerOptions options;
  auto transport =
      yoco::BundleTransportOptions(absl::GetFlag(FLAGS_tls), absl::GetFlag(FLAGS_net_devices),
                                   absl::GetFlag(FLAGS_transport_key_file));
  if (!transport.ok()) {
    std::cerr << "yoco-decode: " << transport.status().message() << "\n";
    return 1;
  }
  options.transport = *transport;
  options.batcher.max_batch = absl::GetFlag(FLAGS_max_batch);
  options.batcher.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_mb) << 20;
  options.batcher.max_queue = absl::GetFlag(FLAGS_max_queue);
  options.resident_kv_budget_bytes = absl::GetFlag(FLAGS_resident_kv_mb) << 20;
  options.transfer_buffer_keep_bytes = absl::GetFlag(FLAGS_transfer_buffer_mb) << 20;
  options.prefault = absl::GetFlag(FLAGS_prefault);
  options.local_prefill_max_tokens = absl::GetFlag(FLAGS_local_prefill_max_tokens);
  auto kind = yoco::ParseBackendKind(absl::GetFlag(FLAGS_backend));
  if (!kind.ok()) {
    std::cerr << "yoco-decode: " << kind.status().message() << "\n";
    return 2;
  }
  // A decode worker never exports a state, so a GPU keeps the recurrent states on the device
  // between steps (only new K/V rows and logits cross the bus).
  const yoco::BackendChoice choice{*kind, absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_device),
                                   /*lazy_host_states=*/true, absl::GetFlag(FLAGS_batch_invariant)};
  auto backend = yoco::MakeBackend(*model, choice);
  if (!backend.ok()) {
    std::cerr << "yoco-decode: " << backend.status().message() << "\n";
    return 1;
  }
  const std::string backend_description = yoco::DescribeBackend(**backend);
  std::unique_ptr<yoco::Backend> prefill_backend;
  if (absl::GetFlag(FLAGS_local_prefill)) {
    yoco::BackendChoice prefill_choice = choice;
    prefill_choice.lazy_host_states = false;  // its states go to the batch's backend
    auto made = yoco::MakeBackend(*model, prefill_choice);
    if (!made.ok()) {
      std::cerr << "yoco-decode: " << made.status().message() << "\n";
      return 1;
    }
    prefill_backend = std::move(*made);
  }
  auto worker =
      yoco::DecodeWorker::Create(std::move(*backend), options, std::move(prefill_backend));
  if (!worker.ok()) {
    std::cerr << "yoco-decode: " << worker.status().message() << "\n";
    return 1;
  }
  auto callbacks = std::make_shared<yoco::ScrapeCallbacks>();
  yoco::DecodeWorker* w = worker->get();
  using Type = yoco::ScrapeCallbacks::Type;
  callbacks->Add("yoco_decode_active_sequences", "Sequences in the decode batch", Type::kGauge,
                 [w] { return w->stats().active; });
  callbacks->Add("yoco_decode_queue_depth", "Sequences waiting for room in the batch", Type::kGauge,
                 [w] { return w->stats().queued; });
  callbacks->Add("yoco_decode_batch_size", "Sequences in the last decode step", Type::kGauge,
                 [w] { return w->stats().last_batch_size; });
  callbacks->Add(
      "yoco_decode_state_memory_bytes",
      "K/V and recurrent state reserved by active sequences, plus bundles waiting for "
      "their Decode call",
      Type::kGauge, [w] {
        return static_cast<double>(w->stats().memory_in_use_bytes + w->waiting_bundle_bytes());
      });
  callbacks->Add("yoco_decode_waiting_bundle_bytes",
                 "Bytes of bundles received but not yet claimed by a Decode call", Type::kGauge,
                 [w] { return static_cast<double>(w->waiting_bundle_bytes()); });
  callbacks->Add("yoco_decode_resident_kv_bytes",
                 "Shared-K/V chunks held under their prefix keys (in use or kept for the next "
                 "question on their document)",
                 Type::kGauge, [w] { return static_cast<double>(w->resident_kv_stats().bytes); });
  callbacks->Add("yoco_decode_resident_kv_idle_bytes",
                 "Resident K/V chunks no sequence reads (bounded by --resident-kv-mb)",
                 Type::kGauge,
                 [w] { return static_cast<double>(w->resident_kv_stats().idle_bytes); });
  callbacks->Add("yoco_decode_resident_kv_chunks_attached_total",
                 "K/V chunks bundles left out because this worker held them", Type::kCounter,
                 [w] { return static_cast<double>(w->resident_kv_stats().attached); });
  callbacks->Add("yoco_decode_resident_kv_misses_total",
                 "Bundles refused because a chunk they left out was no longer held (then sent "
                 "whole)",
                 Type::kCounter,
                 [w] { return static_cast<double>(w->resident_kv_stats().missing); });
  callbacks->Add("yoco_decode_bundle_buffer_idle_bytes",
                 "Memory kept for the next bundles (bounded by --transfer-buffer-mb)", Type::kGauge,
                 [w] { return static_cast<double>(w->bundle_buffer_stats().kept_bytes); });
  callbacks->Add("yoco_decode_steps_total", "Batched decode steps", Type::kCounter,
                 [w] { return static_cast<double>(w->stats().steps); });
  callbacks->Add("yoco_decode_local_prefills_total",
                 "Prompts prefilled on this decode worker instead of a prefill worker",
                 Type::kCounter, [w] { return static_cast<double>(w->local_prefills()); });
  callbacks->Add("yoco_decode_waiting_bundles",
                 "Bundles received but not yet claimed by a Decode call", Type::kGauge,
                 [w] { return static_cast<double>(w->waiting_bundles()); });
  yoco::ExportLoadSignals(
      {.requests_waiting = [w] { return static_cast<double>(w->stats().queued); },
       .requests_running = [w] { return static_cast<double>(w->stats().active); },
       .state_memory_utilization =
           [w] {
             const yoco::DecodeBatcherStats s = w->stats();
             return s.memory_budget_bytes > 0
                        ? static_cast<double>(s.memory_in_use_bytes + w->waiting_bundle_bytes()) /
                              static_cast<double>(s.memory_budget_bytes)
                        : 0.0;
           }},
      absl::GetFlag(FLAGS_vllm_metric_names), callbacks.get());
  yoco::ExportTransferMetrics("yoco_decode", &w->transfer_metrics(), callbacks.get());
  callbacks->Add("yoco_service_draining", "1 from SIGTERM/SIGINT until the service exits",
                 yoco::ScrapeCallbacks::Type::kGauge, [] { return yoco::Draining() ? 1.0 : 0.0; });
  auto registry = std::make_shared<prometheus::Registry>();
  yoco::ExportBackendInfo(*registry, absl::GetFlag(FLAGS_backend), backend_description);
  auto metrics_server =
      yoco::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen), registry, callbacks);
  if (!metrics_server.ok()) {
    std::cerr << "yoco-decode: " << metrics_server.status().message() << "\n";
    return 1;
  }
  if ((*metrics_server)->port() != 0) {
    std::cerr << "yoco-decode: metrics on port " << (*metrics_server)->port() << std::endl;
  }
  yoco::DecodeService service(**worker, absl::GetFlag(FLAGS_listen), backend_description,
                              std::move(*callers));
  int port = 0;
  auto credentials = yoco::MakeServerCredentials(yoco::TlsFilesFromFlags());
  if (!credentials.ok()) {
    std::cerr << "yoco-decode: " << credentials.status().message() << "\n";
    return 1;
  }
  auto server =
      yoco::StartGrpcServer(absl::GetFlag(FLAGS_listen), {&service},
                            yoco::v1::DecodeWorker::service_full_name(), &port, *credentials);
  if (!server.ok()) {
    std::cerr << "yoco-decode: " << server.status().message() << "\n";
    return 1;
  }
  std::cerr << "yoco-decode: serving on port " << port << std::endl;
  yoco::ReadinessReporter readiness(**server, yoco::v1::DecodeWorker::service_full_name(),
                                    [w] { return w->CanAdmit(); });
  yoco::ServeUntilTerminated(**server, absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)),
                             "yoco-decode");
  return 0;
}
