// yoco-decode: the decode worker. Flags, wiring, run.

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "lib/engine/backend_choice.h"
#include "lib/log/log.h"
#include "lib/metrics/load_signals_export.h"
#include "lib/metrics/metrics_server.h"
#include "lib/metrics/transfer_metrics_export.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/heap_retention.h"
#include "lib/rpc/service_flags.h"
#include "lib/workers/decode_worker.h"
#include "services/decode/decode_service.h"
#include "services/worker/worker_startup.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50071", "gRPC address HOST:PORT");
ABSL_FLAG(int, max_batch, 32, "sequences per decode step");
ABSL_FLAG(int, tenant_reserve_seats, -1,
          "seats beyond --max-batch, each for a tenant with no sequence in the batch, so one "
          "tenant filling every seat delays another's first token by a step, not by a whole "
          "answer (-1: max_batch / 4, at least 1; 0: none)");
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

int main(int argc, char** argv) {
  yoco::RetainFreedHeapMemory();
  yoco::BlockTerminationSignals();
  yoco::ParseServiceFlags(argc, argv,
                          "the decode worker (continuous batching, token "
                          "streams).\nusage: yoco-decode --model DIR [flags] (or --flagfile=FILE)");
  yoco::WorkerBase base = yoco::WorkerBaseFromFlagsOrExit();
  yoco::DecodeWorkerOptions options;
  options.structured_output = base.structured_output;
  options.transport = base.transport;
  options.batcher.max_batch = absl::GetFlag(FLAGS_max_batch);
  options.batcher.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_mb) << 20;
  options.batcher.max_queue = absl::GetFlag(FLAGS_max_queue);
  options.batcher.tenant_reserve_seats = absl::GetFlag(FLAGS_tenant_reserve_seats);
  options.resident_kv_budget_bytes = absl::GetFlag(FLAGS_resident_kv_mb) << 20;
  options.transfer_buffer_keep_bytes = absl::GetFlag(FLAGS_transfer_buffer_mb) << 20;
  options.prefault = absl::GetFlag(FLAGS_prefault);
  options.local_prefill_max_tokens = absl::GetFlag(FLAGS_local_prefill_max_tokens);
  // A decode worker never exports a state, so a GPU keeps the recurrent states on the device
  // between steps (only new K/V rows and logits cross the bus).
  yoco::BackendChoice choice = base.backend;
  choice.lazy_host_states = true;
  choice.batch_invariant = absl::GetFlag(FLAGS_batch_invariant);
  auto backend = yoco::MakeBackend(base.model, choice);
  if (!backend.ok()) {
    yoco::LogError(backend.status().message());
    return 1;
  }
  const std::string backend_description = yoco::DescribeBackend(**backend);
  std::unique_ptr<yoco::Backend> prefill_backend;
  if (absl::GetFlag(FLAGS_local_prefill)) {
    yoco::BackendChoice prefill_choice = choice;
    prefill_choice.lazy_host_states = false;  // its states go to the batch's backend
    auto made = yoco::MakeBackend(base.model, prefill_choice);
    if (!made.ok()) {
      yoco::LogError(made.status().message());
      return 1;
    }
    prefill_backend = std::move(*made);
  }
  auto worker =
      yoco::DecodeWorker::Create(std::move(*backend), options, std::move(prefill_backend));
  if (!worker.ok()) {
    yoco::LogError(worker.status().message());
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
  callbacks->Add("yoco_decode_tokens_total",
                 "Tokens decoded (one per sequence per step, replayed ones included)",
                 Type::kCounter, [w] { return static_cast<double>(w->stats().tokens); });
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
      yoco::VllmMetricNames(), callbacks.get());
  yoco::ExportTransferMetrics("yoco_decode", &w->transfer_metrics(), callbacks.get());
  yoco::DecodeService service(**worker, absl::GetFlag(FLAGS_listen), backend_description,
                              std::move(base.callers));
  return yoco::ServeWorker(absl::GetFlag(FLAGS_listen), service,
                           yoco::v1::DecodeWorker::service_full_name(), backend_description,
                           std::move(callbacks), [w] { return w->CanAdmit(); });
}
