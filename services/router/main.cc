// yoco-router: the public API in front of prefill and decode workers. Flags, wiring, run.
#include <algorithm>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/auth/tenant_directory.h"
#include "lib/http/http_server.h"
#include "lib/log/log.h"
#include "lib/metrics/metrics_server.h"
#include "lib/openai/chat_template.h"
#include "lib/rpc/graceful_shutdown.h"
#include "lib/rpc/grpc_server.h"
#include "lib/rpc/heap_retention.h"
#include "lib/rpc/service_flags.h"
#include "lib/rpc/tls_flags.h"
#include "lib/text/byte_tokenizer.h"
#include "lib/text/tiktoken_bpe.h"
#include "services/router/openai_front.h"
#include "services/router/router_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "gRPC address HOST:PORT");
ABSL_FLAG(int, drain_seconds, 30,
          "on SIGTERM/SIGINT: how long calls in flight may run before they are cancelled");
ABSL_FLAG(std::string, metrics_listen, "",
          "Prometheus /metrics address HOST:PORT (empty: no metrics endpoint)");
ABSL_FLAG(std::string, model, "", "model folder (its params.json is read)");
ABSL_FLAG(std::string, prefill, "",
          "prefill workers: HOST:PORT[,...], or dns:///NAME:PORT (every A/AAAA record a worker, "
          "looked up every --discovery-interval-ms; dns://DNS-IP:PORT/NAME:PORT asks that server), "
          "or k8s://NAMESPACE/LABEL_SELECTOR?port=N[&tls_name=NAME] (Ready pods, watched through "
          "the Kubernetes API with the pod's service account)");
ABSL_FLAG(std::string, decode, "", "decode workers, as --prefill");
ABSL_FLAG(std::string, k8s_api_server, "",
          "k8s:// targets: the API server as https://HOST:PORT (default: in-cluster, from "
          "KUBERNETES_SERVICE_HOST/PORT)");
ABSL_FLAG(std::string, k8s_token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token",
          "k8s:// targets: the bearer token (re-read for every request: it rotates)");
ABSL_FLAG(std::string, k8s_ca_file, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
          "k8s:// targets: the CA of the API server's certificate");
ABSL_FLAG(int, discovery_interval_ms, 5000,
          "how often dns:/// worker targets are looked up (and k8s:// watches read)");
ABSL_FLAG(std::string, tiktoken_ranks, "",
          "a .tiktoken ranks file: BPE with YOCO's special tokens "
          "(default: the byte tokenizer)");
ABSL_FLAG(int, probe_interval_ms, 1000,
          "how often workers' health, load and prefix caches are probed");
ABSL_FLAG(int64_t, cache_load_penalty_tokens, 1024,
          "routing: one request of load on a prefill worker weighs as much as this many prompt "
          "tokens it has cached");
ABSL_FLAG(int, max_load_wait_ms, 60000,
          "a request every worker refuses for load waits at the router for room this long at "
          "most (within its deadline), tenants taking turns; then RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_waiting_requests, 1024,
          "requests that may wait at the router for room (0: a refusal for load is final); "
          "beyond, RESOURCE_EXHAUSTED (HTTP 429 with Retry-After)");
ABSL_FLAG(double, stall_multiple, 50,
          "a decode stream that gets no token for this many times its average gap between "
          "tokens (at least --min-stall-ms), or whose worker fails its health probe, moves to "
          "another pair with the tokens already sent");
ABSL_FLAG(int, min_stall_ms, 2000, "the shortest gap between tokens taken for a stalled worker");
ABSL_FLAG(int, wait_for_workers_ms, 10000,
          "a request that finds no healthy prefill and decode worker waits this long (within its "
          "deadline) for one before UNAVAILABLE");
ABSL_FLAG(uint32_t, local_prefill_max_tokens, 128,
          "conditional disaggregation: a prompt of at most this many tokens with no cached prefix "
          "is prefilled on its decode worker (when the worker offers it) instead of being "
          "shipped from a prefill worker; 0: never. Default: one cache block (shorter prompts "
          "can never hit the prefix cache), where local prefill halves TTFT (README)");
ABSL_FLAG(uint32_t, local_prefill_max_load, 8,
          "... only on a decode worker with fewer requests than this (a local prefill delays its "
          "batch)");
ABSL_FLAG(std::string, tenants, "",
          "a JSON file of tenants, their bearer tokens and client-certificate identities: every "
          "call must then come from a tenant, whose name is its cache salt (see the README)");
ABSL_FLAG(int, tenants_reload_seconds, 10,
          "how often the --tenants file is checked for changes (a new one is taken if it parses)");
ABSL_FLAG(std::string, http_listen, "",
          "OpenAI-compatible HTTP API address HOST:PORT (/v1/completions, /v1/chat/completions, "
          "/v1/models, /health, /ready, ...; empty: none)");
ABSL_FLAG(std::string, served_model_name, "",
          "the model's name in the HTTP API (default: the --model folder's name)");
ABSL_FLAG(int, http_threads, 2, "I/O threads of the HTTP API");
ABSL_FLAG(int, http_request_timeout_seconds, 600,
          "an HTTP request's deadline when it sends no X-Request-Timeout header");
ABSL_FLAG(int, http_max_connections, 1024, "HTTP connections at once (more: 503)");
ABSL_FLAG(int64_t, http_max_body_bytes, 8 << 20, "largest HTTP request body (more: 413)");
ABSL_FLAG(int, http_read_timeout_seconds, 10,
          "an HTTP request's headers and body must arrive within this (slow clients are dropped)");
ABSL_FLAG(int, http_idle_timeout_seconds, 60, "a keep-alive connection idle this long is closed");
ABSL_FLAG(
    std::string, worker_tls_cert, "",
    "PEM certificate the router presents to workers (default: --tls-cert), e.g. one from a "
    "CA only the cluster's own services get, which the workers trust instead of the clients'");
ABSL_FLAG(std::string, worker_tls_key, "",
          "PEM private key of --worker-tls-cert (default: --tls-key)");
ABSL_FLAG(std::string, worker_tls_ca, "",
          "PEM CA bundle the workers' certificates must chain to (default: --tls-ca)");
ABSL_FLAG(std::string, http_tls_cert, "",
          "HTTPS certificate of the HTTP API (default: --tls-cert; with it --tls-key and "
          "--tls-ca, which then requires client certificates)");
ABSL_FLAG(std::string, http_tls_key, "", "PEM private key of --http-tls-cert");
ABSL_FLAG(std::string, http_tls_ca, "",
          "with --http-tls-cert: HTTP clients must present a certificate this CA signed");
ABSL_FLAG(bool, access_log, true,
          "log one line per finished Generate call (request id, tenant, prompt, cached and "
          "generated tokens, TTFT, duration, outcome, retries, the workers that served it)");
ABSL_FLAG(bool, snapshot_conversations, true,
          "after each request, extend its prefill worker's cache over the generated tokens so a "
          "follow-up turn prefills only what is new");

namespace {

// --served-model-name, or the model folder's name.
std::string ServedModelName() {
  std::string name = absl::GetFlag(FLAGS_served_model_name);
  if (!name.empty()) return name;
  const std::filesystem::path model_dir =
      std::filesystem::path(absl::GetFlag(FLAGS_model)).lexically_normal();
  name = model_dir.filename();
  if (name.empty()) name = model_dir.parent_path().filename();
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  yoco::RetainFreedHeapMemory();
  yoco::BlockTerminationSignals();
  yoco::ParseServiceFlags(argc, argv,
                          "the public gRPC API in front of prefill and decode "
                          "workers.\nusage: yoco-router --model DIR --prefill HOST:PORT[,...] "
                          "--decode HOST:PORT[,...] [flags] (or --flagfile=FILE)");
  auto config = yoco::ModelConfig::FromFile(absl::GetFlag(FLAGS_model) + "/params.json");
  if (!config.ok()) {
    yoco::LogError(config.status().message());
    return 1;
  }
  std::unique_ptr<yoco::Tokenizer> tokenizer = std::make_unique<yoco::ByteTokenizer>();
  std::string tokenizer_name = "bytes";
  if (!absl::GetFlag(FLAGS_tiktoken_ranks).empty()) {
    auto bpe = yoco::TiktokenBpe::Load(absl::GetFlag(FLAGS_tiktoken_ranks), yoco::kCl100kPattern,
                                       yoco::YocoSpecialTokens());
    if (!bpe.ok()) {
      yoco::LogError(bpe.status().message());
      return 1;
    }
    tokenizer = std::move(*bpe);
    tokenizer_name = "tiktoken";
  }
  if (tokenizer->id_limit() > config->vocab_size) {
    yoco::LogError("the tokenizer's ids do not fit the model's vocabulary")
        .With("id_limit", tokenizer->id_limit())
        .With("vocab_size", config->vocab_size);
    return 1;
  }
  yoco::RouterOptions options;
  options.worker_tls = yoco::TlsFilesFromFlags();
  for (auto [flag, file] : {std::pair{&FLAGS_worker_tls_cert, &options.worker_tls.cert},
                            std::pair{&FLAGS_worker_tls_key, &options.worker_tls.key},
                            std::pair{&FLAGS_worker_tls_ca, &options.worker_tls.ca}}) {
    if (!absl::GetFlag(*flag).empty()) *file = absl::GetFlag(*flag);
  }
  if (auto worker_credentials = yoco::MakeChannelCredentials(options.worker_tls);
      !worker_credentials.ok()) {
    yoco::LogError(absl::StrCat("calls to workers: ", worker_credentials.status().message()));
    return 1;
  }
  options.prefill_workers = absl::StrSplit(absl::GetFlag(FLAGS_prefill), ',', absl::SkipEmpty());
  options.decode_workers = absl::StrSplit(absl::GetFlag(FLAGS_decode), ',', absl::SkipEmpty());
  if (options.prefill_workers.empty() || options.decode_workers.empty()) {
    yoco::LogError("--prefill and --decode are required");
    return 1;
  }
  options.probe_interval = absl::Milliseconds(absl::GetFlag(FLAGS_probe_interval_ms));
  options.cache_load_penalty_tokens = absl::GetFlag(FLAGS_cache_load_penalty_tokens);
  options.snapshot_conversations = absl::GetFlag(FLAGS_snapshot_conversations);
  options.access_log = absl::GetFlag(FLAGS_access_log);
  options.model_name = ServedModelName();
  options.wait_for_workers = absl::Milliseconds(absl::GetFlag(FLAGS_wait_for_workers_ms));
  options.stall_multiple = absl::GetFlag(FLAGS_stall_multiple);
  options.min_stall = absl::Milliseconds(std::max(1, absl::GetFlag(FLAGS_min_stall_ms)));
  options.max_load_wait = absl::Milliseconds(std::max(0, absl::GetFlag(FLAGS_max_load_wait_ms)));
  options.max_waiting_requests =
      static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_max_waiting_requests)));
  options.local_prefill_max_tokens = absl::GetFlag(FLAGS_local_prefill_max_tokens);
  options.local_prefill_max_load = absl::GetFlag(FLAGS_local_prefill_max_load);
  std::unique_ptr<yoco::TenantDirectory> tenants;
  if (!absl::GetFlag(FLAGS_tenants).empty()) {
    auto opened = yoco::TenantDirectory::Open(
        absl::GetFlag(FLAGS_tenants), absl::Seconds(absl::GetFlag(FLAGS_tenants_reload_seconds)));
    if (!opened.ok()) {
      yoco::LogError(absl::StrCat("--tenants: ", opened.status().message()));
      return 1;
    }
    tenants = *std::move(opened);
    options.tenants = tenants.get();
    if (yoco::TlsFilesFromFlags().cert.empty()) {
      yoco::LogWarning("--tenants without --tls-cert: bearer tokens travel in plaintext");
    }
  }
  auto registry = std::make_shared<prometheus::Registry>();
  yoco::RouterMetrics metrics(*registry);
  options.discovery_interval = absl::Milliseconds(absl::GetFlag(FLAGS_discovery_interval_ms));
  options.k8s_api_server = absl::GetFlag(FLAGS_k8s_api_server);
  options.k8s_token_file = absl::GetFlag(FLAGS_k8s_token_file);
  options.k8s_ca_file = absl::GetFlag(FLAGS_k8s_ca_file);
  yoco::RouterService service(*config, std::move(tokenizer), tokenizer_name, options, &metrics);
  if (absl::Status st = service.Start(); !st.ok()) {
    yoco::LogError(st.message());
    return 1;
  }
  auto callbacks = std::make_shared<yoco::ScrapeCallbacks>();
  callbacks->Add("yoco_router_background_jobs", "Conversation snapshots queued or being made",
                 yoco::ScrapeCallbacks::Type::kGauge,
                 [&service] { return static_cast<double>(service.background_jobs()); });
  callbacks->Add("yoco_router_requests_waiting_for_room",
                 "Requests every worker refused for load, waiting at the router",
                 yoco::ScrapeCallbacks::Type::kGauge,
                 [&service] { return static_cast<double>(service.requests_waiting_for_room()); });
  callbacks->Add("yoco_service_draining", "1 from SIGTERM/SIGINT until the service exits",
                 yoco::ScrapeCallbacks::Type::kGauge, [] { return yoco::Draining() ? 1.0 : 0.0; });
  auto metrics_server =
      yoco::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen), registry, callbacks);
  if (!metrics_server.ok()) {
    yoco::LogError(metrics_server.status().message());
    return 1;
  }
  if ((*metrics_server)->port() != 0) {
    yoco::LogInfo(absl::StrCat("metrics on port ", (*metrics_server)->port()));
  }
  int port = 0;
  auto credentials = yoco::MakeServerCredentials(yoco::TlsFilesFromFlags());
  if (!credentials.ok()) {
    yoco::LogError(credentials.status().message());
    return 1;
  }
  auto server = yoco::StartGrpcServer(absl::GetFlag(FLAGS_listen), {&service},
                                      yoco::v1::Yoco::service_full_name(), &port, *credentials);
  if (!server.ok()) {
    yoco::LogError(server.status().message());
    return 1;
  }
  yoco::LogInfo(absl::StrCat("serving on port ", port));
  // The HTTP front and its server outlive main when calls did not end in time (below).
  yoco::OpenAiFront* front = nullptr;
  std::unique_ptr<yoco::HttpServer> http;
  if (!absl::GetFlag(FLAGS_http_listen).empty()) {
    const std::string model_dir = absl::GetFlag(FLAGS_model);
    auto chat_template = yoco::ChatTemplate::Load(model_dir, *config);
    if (!chat_template.ok()) {
      yoco::LogError(chat_template.status().message());
      return 1;
    }
    yoco::OpenAiFrontOptions front_options;
    front_options.model_name = options.model_name;
    front_options.defaults.max_seq_len = config->max_seq_len;
    front_options.request_timeout =
        absl::Seconds(absl::GetFlag(FLAGS_http_request_timeout_seconds));
    grpc::ChannelArguments channel_args;
    channel_args.SetMaxReceiveMessageSize(yoco::kMaxGrpcMessageBytes);  // long cache listings
    front = new yoco::OpenAiFront(
        (*server)->InProcessChannel(channel_args), service.tokenizer(), *std::move(chat_template),
        [&service] { return service.CanAdmit(); }, front_options, &metrics.http_responses);
    yoco::HttpServerOptions http_options;
    http_options.threads = absl::GetFlag(FLAGS_http_threads);
    http_options.max_connections = absl::GetFlag(FLAGS_http_max_connections);
    http_options.max_body_bytes = absl::GetFlag(FLAGS_http_max_body_bytes);
    http_options.request_read_timeout =
        absl::Seconds(absl::GetFlag(FLAGS_http_read_timeout_seconds));
    http_options.idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_http_idle_timeout_seconds));
    const yoco::TlsFiles grpc_tls = yoco::TlsFilesFromFlags();
    if (!absl::GetFlag(FLAGS_http_tls_cert).empty()) {
      http_options.tls =
          yoco::HttpTlsFiles{absl::GetFlag(FLAGS_http_tls_cert), absl::GetFlag(FLAGS_http_tls_key),
                             absl::GetFlag(FLAGS_http_tls_ca), grpc_tls.reload};
    } else if (!grpc_tls.cert.empty()) {
      http_options.tls =
          yoco::HttpTlsFiles{grpc_tls.cert, grpc_tls.key, grpc_tls.ca, grpc_tls.reload};
    } else if (tenants != nullptr) {
      yoco::LogWarning("--tenants with a plain-HTTP API: bearer tokens travel in plaintext");
    }
    auto started = yoco::HttpServer::Start(
        absl::GetFlag(FLAGS_http_listen), http_options,
        [front](yoco::HttpRequest request, std::shared_ptr<yoco::HttpExchange> exchange) {
          front->Handle(std::move(request), std::move(exchange));
        });
    if (!started.ok()) {
      yoco::LogError(absl::StrCat("--http-listen: ", started.status().message()));
      return 1;
    }
    http = *std::move(started);
    yoco::LogInfo(absl::StrCat(http_options.tls ? "HTTPS" : "HTTP", " API on port ", http->port()))
        .With("model", front_options.model_name);
  }
  yoco::ServeUntilTerminated(**server, absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)));
  if (front != nullptr) {
    // Calls still in flight hold exchanges of the HTTP server: if they do not end, both are
    // left to the process's exit rather than destroyed under them.
    if (!front->Shutdown(absl::Seconds(10))) {
      yoco::LogWarning("HTTP calls did not end in time");
      http.release();
      return 0;
    }
    http->Stop();
    http.reset();
    delete front;
  }
  return 0;
}
