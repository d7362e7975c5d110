// ServingCluster: the whole stack as real processes on loopback for a GoogleTest — prefill and
// decode workers and a router (yoco-prefill, yoco-decode, yoco-router from the build), each on a
// port the OS picks (read back from its "serving on port N" line), ready when its gRPC health
// says SERVING, never after a fixed sleep. Helpers: kill, freeze, restart on the same port,
// SIGTERM; metrics scraped from each service; Generate through the router; the in-process
// engine's tokens to compare with. A new scenario is a short test:
//
//   ClusterOptions options;
//   options.decode_workers = 2;
//   auto cluster = ServingCluster::Start(options);
//   ASSERT_TRUE(cluster.ok()) << cluster.status();
//   Generated got = (*cluster)->Generate(Request(prompt, 20));
//   EXPECT_EQ(got.tokens, InProcessTokens(prompt, 20));
#ifndef YOCO_TESTS_CLUSTER_SERVING_CLUSTER_H_
#define YOCO_TESTS_CLUSTER_SERVING_CLUSTER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/engine/generation.h"
#include "tests/cluster/service_process.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco::testing {

// The build's binaries and the random test model (set by CMake).
std::string BinaryPath(absl::string_view name);
std::string TinyModelDir();

enum class Role { kPrefill, kDecode, kRouter };

// One service process and how to start it again.
class Service {
 public:
  // Starts `role` with `flags` (plus --listen `host`:`port`, 0: the OS picks, and
  // --metrics-listen on a loopback port the OS picks), its log at `log_path`; returns once its
  // health check says SERVING. `credentials`: how to reach it (null: plaintext), verifying the
  // certificate for `tls_name` when given (a worker found by name) rather than for `host`.
  static absl::StatusOr<std::unique_ptr<Service>> Start(
      Role role, std::vector<std::string> flags, std::string log_path, int port = 0,
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
      std::string host = "127.0.0.1", std::string tls_name = "");

  Role role() const { return role_; }
  int port() const { return port_; }
  std::string address() const;  // HOST:PORT
  int metrics_port() const { return metrics_port_; }
  ServiceProcess& process() { return *process_; }
  bool running() { return !process_->ExitStatus().has_value(); }

  // Kills the process if it runs and starts it again with the same flags on the same port.
  absl::Status Restart();
  // As a rolling update replaces a pod: SIGTERM (the service drains its calls in flight), then
  // the same service again on the same port with `flags` added to its own (a later flag wins).
  absl::Status Replace(const std::vector<std::string>& flags,
                       absl::Duration drain = absl::Seconds(60));

  // The sum of the values of every series whose "name{labels}" starts with `prefix` (0 when
  // none does), scraped now from /metrics. -1 when the scrape fails.
  double Metric(absl::string_view prefix) const;
  // Every series' "name{labels}" on /metrics now (empty when the scrape fails).
  std::vector<std::string> MetricSeries() const;

  std::shared_ptr<grpc::Channel> Channel() const;

 private:
  Service(Role role, std::vector<std::string> flags, std::string log_path,
          std::shared_ptr<grpc::ChannelCredentials> credentials, std::string host,
          std::string tls_name)
      : role_(role),
        flags_(std::move(flags)),
        log_path_(std::move(log_path)),
        credentials_(std::move(credentials)),
        host_(std::move(host)),
        tls_name_(std::move(tls_name)) {}
  absl::Status Launch(int port);

  const Role role_;
  std::vector<std::string> flags_;
  const std::string log_path_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const std::string host_;
  const std::string tls_name_;
  std::unique_ptr<ServiceProcess> process_;
  int port_ = 0;
  int metrics_port_ = 0;
};

struct ClusterOptions {
  std::string model_dir = TinyModelDir();
  int prefill_workers = 1;
  int decode_workers = 1;
  // Added to every worker's (e.g. --weights bf16), to the prefill or decode workers', and to the
  // router's flags. "{dir}" in a flag stands for the cluster's folder.
  std::vector<std::string> worker_flags;
  std::vector<std::string> prefill_flags;
  std::vector<std::string> decode_flags;
  std::vector<std::string> router_flags;
  // Added to prefill or decode worker i's flags only (e.g. one worker without local prefill, or
  // with another --model).
  std::vector<std::vector<std::string>> prefill_flags_each;
  std::vector<std::vector<std::string>> decode_flags_each;
  // As a deployment mounts its secrets: every gRPC connection mutual TLS (a CA, a "server"
  // certificate for the services, the router calling workers with it, and a "client" one for
  // callers of the router; workers admit only "server"), workers taking only transport
  // addresses sealed with the cluster's transport key, prefill workers only snapshots tagged with
  // its cache key.
  bool secure = false;
  // With `secure`: called with the cluster's folder once its CA, "server" and "client"
  // certificates are made, before any service starts (a test makes further certificates or its
  // tenant file there).
  std::function<absl::Status(const std::string& dir)> prepare;
  // With `secure`: the router's own certificate, made by `prepare` unless "server" (the only
  // identity workers admit).
  std::string router_certificate = "server";
  // With `secure`: a bearer token the cluster's own calls to the router send (a router with
  // --tenants).
  std::string bearer_token;
  // Each prefill worker writes snapshots through to DIR/cacheN (--cache-dir).
  bool prefill_cache_dirs = false;
};

// Certificates made with openssl in `dir`: a self-signed CA (DIR/NAME.pem, DIR/NAME.key), and a
// certificate for the loopback addresses and localhost signed by the CA at DIR/CA.pem, valid for
// `days` (0: until this second), with `serial` (and `san` as its subjectAltName when given).
absl::Status MakeTestCa(const std::string& dir, const std::string& name);
// Credentials of a caller trusting DIR/ca.pem, presenting DIR/CERTIFICATE.pem unless empty, and
// sending `bearer_token` unless empty.
std::shared_ptr<grpc::ChannelCredentials> TestCredentials(const std::string& dir,
                                                          const std::string& certificate,
                                                          const std::string& bearer_token = "");
absl::Status MakeTestCertificate(const std::string& dir, const std::string& name,
                                 const std::string& ca, int days, int serial,
                                 const std::string& san = "");

// What a Generate call through the router gave.
struct Generated {
  std::vector<int32_t> tokens;
  std::string text;                          // the tokens' text, as the router streamed it
  std::vector<v1::GeneratedToken> messages;  // each token's message (its logprobs, when asked)
  grpc::Status status;
  v1::Finish finish;  // the last event, when the stream ended with one
};

// Generate on `stub`, the stream read to its end; `received`, when given, counts the tokens as
// they arrive (for a test that acts mid-stream while another thread reads).
Generated Generate(v1::Yoco::Stub& stub, const v1::GenerateRequest& request,
                   absl::Duration timeout = absl::Seconds(120),
                   std::atomic<int>* received = nullptr);

// Every request opened at once (one thread each, released together), each read to its end.
std::vector<Generated> GenerateAtOnce(v1::Yoco::Stub& stub,
                                      const std::vector<v1::GenerateRequest>& requests,
                                      absl::Duration timeout = absl::Seconds(300));

// A GenerateRequest for `prompt`: greedy unless `sampling` says otherwise.
v1::GenerateRequest Request(const std::vector<int32_t>& prompt, int max_new_tokens,
                            const SamplingParams& sampling = {});

// The tokens the in-process engine generates for the same request (the model loaded once per
// model folder, weight format and K/V dtype).
std::vector<int32_t> InProcessTokens(const std::vector<int32_t>& prompt, int max_new_tokens,
                                     const SamplingParams& sampling = {},
                                     const std::string& model_dir = TinyModelDir(),
                                     const std::string& weights = "as-stored",
                                     const std::string& kv_dtype = "f32");

// A random prompt: BOS, then `length` - 1 ids in [4, 512), the same for the same seed.
std::vector<int32_t> RandomPrompt(uint32_t seed, int length);

// A tool (yoco-cli, a test helper) run to its end: its exit status (-1 when it did not end within
// `timeout`) and what it printed on stdout and stderr together.
struct ToolRun {
  int status = -1;
  std::string output;
};
ToolRun RunToCompletion(const std::string& binary, const std::vector<std::string>& args,
                        const std::string& log_path, absl::Duration timeout = absl::Seconds(60));

// A loopback port nothing listens on now (for a service that must be named before it starts), from
// below the kernel's ephemeral range so no connection takes it meanwhile; never the same one twice
// in a process.
int FreePort();

// Polls `done` every 20 ms until it holds or `timeout` passes; says whether it held.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout);

class ServingCluster {
 public:
  // Starts the workers, then the router over them, and returns once a one-token request is
  // served through the router.
  static absl::StatusOr<std::unique_ptr<ServingCluster>> Start(const ClusterOptions& options);
  ~ServingCluster();

  Service& router() { return *router_; }
  Service& prefill(int i) { return *prefill_[i]; }
  Service& decode(int i) { return *decode_[i]; }
  const std::string& dir() const { return dir_; }
  // With ClusterOptions::secure: credentials of a caller of the router ("client"), and of the
  // router ("server", what workers admit); null otherwise.
  std::shared_ptr<grpc::ChannelCredentials> client_credentials() const { return client_; }
  std::shared_ptr<grpc::ChannelCredentials> router_credentials() const { return router_side_; }

  // yoco-cli's flags to reach the router: --router and, with `secure`, the client's certificate.
  std::vector<std::string> CliFlags() const;

  // Generate through the router; the stream read to its end.
  Generated Generate(const v1::GenerateRequest& request,
                     absl::Duration timeout = absl::Seconds(120));
  v1::Yoco::Stub& stub() { return *stub_; }

  // Until a one-token request is served through the router.
  absl::Status WaitUntilServing(absl::Duration timeout = absl::Seconds(60));

  // Every service's log tail, for a failure message.
  std::string Logs() const;

 private:
  ServingCluster() = default;
  absl::Status MakeSecrets(const ClusterOptions& options);  // certificates and keys in dir_

  std::string dir_;
  std::vector<std::unique_ptr<Service>> prefill_, decode_;
  std::unique_ptr<Service> router_;
  std::unique_ptr<v1::Yoco::Stub> stub_;
  std::shared_ptr<grpc::ChannelCredentials> client_, router_side_;
};

// A fresh folder under $TMPDIR (or /tmp) for one test's logs and files, removed by the caller.
std::string MakeTestDir();

}  // namespace yoco::testing

#endif  // YOCO_TESTS_CLUSTER_SERVING_CLUSTER_H_
