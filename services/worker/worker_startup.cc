// The flags and start-up steps both workers share.
#include "services/worker/worker_startup.h"

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "lib/auth/allowed_callers_flag.h"
#include "lib/log/log.h"
#include "lib/metrics/backend_info_export.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_server.h"
#include "lib/rpc/readiness_reporter.h"
#include "lib/rpc/tls_flags.h"
#include "lib/text/byte_tokenizer.h"
#include "lib/text/tiktoken_bpe.h"
#include "lib/workers/bundle_transport.h"

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
ABSL_FLAG(std::string, tiktoken_ranks, "",
          "a .tiktoken ranks file, as the router's --tiktoken-ranks: the vocabulary structured "
          "output masks tokens by (default: the byte tokenizer's)");
ABSL_FLAG(bool, vllm_metric_names, false,
          "also export the load gauges under vLLM's names (vllm:num_requests_waiting, ...)");

namespace yoco {
namespace {

[[noreturn]] void Exit(int code, const std::string& why) {
  LogError(why);
  std::exit(code);
}

constexpr int kBadFlag = 2;
constexpr int kFailed = 1;

}  // namespace

WorkerBase WorkerBaseFromFlagsOrExit() {
  WorkerBase base;
  auto callers = AllowedCallersFromFlags(!TlsFilesFromFlags().ca.empty());
  if (!callers.ok()) Exit(kBadFlag, std::string(callers.status().message()));
  if (callers->admits_everyone()) {
    LogWarning(
        "no mutual TLS: any client that reaches this port can call the worker's API (keep it "
        "behind the NetworkPolicy, or serve with --tls-ca and --allowed-callers)");
  }
  base.callers = std::move(*callers);
  auto weights = ParseWeightFormat(absl::GetFlag(FLAGS_weights));
  if (!weights.ok()) Exit(kBadFlag, absl::StrCat("--", weights.status().message()));
  auto kv_dtype = ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) {
    Exit(kBadFlag, absl::StrCat("--kv-dtype: ", kv_dtype.status().message()));
  }
  auto model = Model::Load(absl::GetFlag(FLAGS_model), *weights, *kv_dtype);
  if (!model.ok()) Exit(kFailed, std::string(model.status().message()));
  base.model = std::move(*model);
  std::unique_ptr<Tokenizer> tokenizer = std::make_unique<ByteTokenizer>();
  if (const std::string ranks = absl::GetFlag(FLAGS_tiktoken_ranks); !ranks.empty()) {
    auto bpe = TiktokenBpe::Load(ranks, kCl100kPattern, YocoSpecialTokens());
    if (!bpe.ok()) Exit(kFailed, std::string(bpe.status().message()));
    tokenizer = std::move(*bpe);
  }
  base.structured_output =
      std::make_shared<StructuredOutput>(TokenBytes(*tokenizer, base.model->config().vocab_size));
  auto transport =
      BundleTransportOptions(absl::GetFlag(FLAGS_tls), absl::GetFlag(FLAGS_net_devices),
                             absl::GetFlag(FLAGS_transport_key_file));
  if (!transport.ok()) Exit(kFailed, std::string(transport.status().message()));
  base.transport = std::move(*transport);
  auto kind = ParseBackendKind(absl::GetFlag(FLAGS_backend));
  if (!kind.ok()) Exit(kBadFlag, std::string(kind.status().message()));
  base.backend.kind = *kind;
  base.backend.threads = absl::GetFlag(FLAGS_threads);
  base.backend.device = absl::GetFlag(FLAGS_device);
  return base;
}

bool VllmMetricNames() { return absl::GetFlag(FLAGS_vllm_metric_names); }

int ServeWorker(const std::string& listen, grpc::Service& service, const std::string& service_name,
                const std::string& backend_description, std::shared_ptr<ScrapeCallbacks> callbacks,
                std::function<bool()> ready) {
  callbacks->Add("yoco_service_draining", "1 from SIGTERM/SIGINT until the service exits",
                 ScrapeCallbacks::Type::kGauge, [] { return Draining() ? 1.0 : 0.0; });
  auto registry = std::make_shared<prometheus::Registry>();
  ExportBackendInfo(*registry, absl::GetFlag(FLAGS_backend), backend_description);
  auto metrics_server =
      MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen), registry, std::move(callbacks));
  if (!metrics_server.ok()) {
    LogError(metrics_server.status().message());
    return kFailed;
  }
  if ((*metrics_server)->port() != 0) {
    LogInfo(absl::StrCat("metrics on port ", (*metrics_server)->port()));
  }
  auto credentials = MakeServerCredentials(TlsFilesFromFlags());
  if (!credentials.ok()) {
    LogError(credentials.status().message());
    return kFailed;
  }
  int port = 0;
  auto server = StartGrpcServer(listen, {&service}, service_name, &port, *credentials);
  if (!server.ok()) {
    LogError(server.status().message());
    return kFailed;
  }
  LogInfo(absl::StrCat("serving on port ", port));
  ReadinessReporter readiness(**server, service_name, std::move(ready));
  ServeUntilTerminated(**server, absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)));
  return 0;
}

}  // namespace yoco
