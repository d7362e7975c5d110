// The cluster fixture: starting, readiness, metrics, the in-process reference.
#include "tests/cluster/serving_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <barrier>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/model.h"
#include "lib/rpc/health_check.h"
#include "lib/rpc/proto_convert.h"
#include "lib/rpc/tls_credentials.h"
#include "loadtest/metrics_scrape.h"

namespace yoco::testing {
namespace {

const char* BinaryName(Role role) {
  switch (role) {
    case Role::kPrefill:
      return "yoco-prefill";
    case Role::kDecode:
      return "yoco-decode";
    case Role::kRouter:
      return "yoco-router";
  }
  return "";
}

// The gRPC service whose health says the role takes requests.
const char* ReadinessService(Role role) {
  switch (role) {
    case Role::kPrefill:
      return "yoco.v1.PrefillWorker";
    case Role::kDecode:
      return "yoco.v1.DecodeWorker";
    case Role::kRouter:
      return "yoco.v1.Yoco";
  }
  return "";
}

constexpr absl::Duration kStartTimeout = absl::Seconds(120);

}  // namespace

std::string BinaryPath(absl::string_view name) { return absl::StrCat(YOCO_BIN_DIR, "/", name); }
std::string TinyModelDir() { return YOCO_TINY_MODEL_DIR; }

std::string MakeTestDir() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/yoco-cluster-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Service>> Service::Start(
    Role role, std::vector<std::string> flags, std::string log_path, int port,
    std::shared_ptr<grpc::ChannelCredentials> credentials, std::string host, std::string tls_name) {
  std::unique_ptr<Service> service(new Service(role, std::move(flags), std::move(log_path),
                                               std::move(credentials), std::move(host),
                                               std::move(tls_name)));
  absl::Status started = service->Launch(port);
  if (!started.ok()) return started;
  return service;
}

absl::Status Service::Launch(int port) {
  std::vector<std::string> args = flags_;
  args.insert(args.end(),
              {"--listen", absl::StrCat(host_, ":", port), "--metrics-listen", "127.0.0.1:0"});
  absl::StatusOr<std::unique_ptr<ServiceProcess>> process = ServiceProcess::Start(
      BinaryPath(BinaryName(role_)), args, log_path_, {"UCX_WARN_UNUSED_ENV_VARS=n"});
  if (!process.ok()) return process.status();
  process_ = *std::move(process);
  absl::StatusOr<int> bound = process_->WaitForNumberAfter("serving on port", kStartTimeout);
  if (!bound.ok()) return bound.status();
  port_ = *bound;
  // Printed before the gRPC port, so it is there by now.
  absl::StatusOr<int> metrics = process_->WaitForNumberAfter("metrics on port", absl::Seconds(1));
  if (!metrics.ok()) return metrics.status();
  metrics_port_ = *metrics;
  const std::shared_ptr<grpc::Channel> channel = Channel();
  absl::Status last = absl::UnavailableError("no answer");
  const bool ready = WaitFor(
      [&] {
        absl::StatusOr<HealthState> state =
            CheckHealth(channel, ReadinessService(role_), absl::Seconds(5));
        last = state.ok() ? absl::UnavailableError(HealthStateName(*state)) : state.status();
        return state.ok() && *state == HealthState::kServing;
      },
      kStartTimeout);
  if (!ready) {
    return absl::UnavailableError(absl::StrCat(BinaryName(role_), " on port ", port_,
                                               " never became ready: ", last.ToString(),
                                               "; log: ", process_->LogTail()));
  }
  return absl::OkStatus();
}

absl::Status Service::Restart() {
  if (process_) process_->Kill();
  return Launch(port_);
}

absl::Status Service::Replace(const std::vector<std::string>& flags, absl::Duration drain) {
  if (process_) {
    absl::StatusOr<int> exit = process_->Terminate(drain);
    if (!exit.ok()) return exit.status();
  }
  flags_.insert(flags_.end(), flags.begin(), flags.end());
  return Launch(port_);
}

std::string Service::address() const { return absl::StrCat(host_, ":", port_); }

std::shared_ptr<grpc::Channel> Service::Channel() const {
  grpc::ChannelArguments args;
  if (!tls_name_.empty()) args.SetSslTargetNameOverride(tls_name_);
  return grpc::CreateCustomChannel(
      address(), credentials_ ? credentials_ : grpc::InsecureChannelCredentials(), args);
}

double Service::Metric(absl::string_view prefix) const {
  absl::StatusOr<std::string> text =
      HttpGet(absl::StrCat("http://127.0.0.1:", metrics_port_, "/metrics"));
  if (!text.ok()) return -1;
  double sum = 0;
  for (const auto& [series, value] : ParsePrometheusText(*text)) {
    if (absl::StartsWith(series, prefix)) sum += value;
  }
  return sum;
}

std::vector<std::string> Service::MetricSeries() const {
  absl::StatusOr<std::string> text =
      HttpGet(absl::StrCat("http://127.0.0.1:", metrics_port_, "/metrics"));
  std::vector<std::string> series;
  if (!text.ok()) return series;
  for (const auto& [name, value] : ParsePrometheusText(*text)) series.push_back(name);
  return series;
}

v1::GenerateRequest Request(const std::vector<int32_t>& prompt, int max_new_tokens,
                            const SamplingParams& sampling) {
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  ToProto(sampling, request.mutable_sampling());
  request.mutable_sampling()->set_max_new_tokens(max_new_tokens);
  return request;
}

std::vector<int32_t> InProcessTokens(const std::vector<int32_t>& prompt, int max_new_tokens,
                                     const SamplingParams& sampling, const std::string& model_dir,
                                     const std::string& weights, const std::string& kv_dtype) {
  static absl::Mutex mu;
  static auto* models =
      new std::map<std::tuple<std::string, std::string, std::string>, std::shared_ptr<const Model>>;
  std::shared_ptr<const Model> model;
  {
    absl::MutexLock lock(&mu);
    std::shared_ptr<const Model>& kept = (*models)[{model_dir, weights, kv_dtype}];
    if (!kept) {
      absl::StatusOr<WeightFormat> format = ParseWeightFormat(weights);
      absl::StatusOr<KvDtype> dtype = ParseKvDtype(kv_dtype);
      if (!format.ok() || !dtype.ok()) return {};
      absl::StatusOr<std::shared_ptr<const Model>> loaded = Model::Load(model_dir, *format, *dtype);
      if (!loaded.ok()) return {};
      kept = *loaded;
    }
    model = kept;
  }
  CpuBackend backend(model);
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.sampling = sampling;
  absl::StatusOr<std::vector<int32_t>> tokens = yoco::Generate(backend, prompt, options);
  return tokens.ok() ? *tokens : std::vector<int32_t>{};
}

std::vector<int32_t> RandomPrompt(uint32_t seed, int length) {
  std::mt19937 rng(seed);
  std::vector<int32_t> prompt = {0};
  while (static_cast<int>(prompt.size()) < length) {
    prompt.push_back(4 + static_cast<int32_t>(rng() % 508));
  }
  return prompt;
}

namespace {

absl::Status RunOpenssl(const std::string& dir, const std::vector<std::string>& args) {
  const ToolRun run = RunToCompletion("/usr/bin/openssl", args, dir + "/openssl.log");
  if (run.status == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("openssl ", args[0], ": ", run.output));
}

}  // namespace

absl::Status MakeTestCa(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  return RunOpenssl(
      dir, {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", path + ".key", "-out", path + ".pem", "-days", "2", "-subj", "/CN=" + name});
}

absl::Status MakeTestCertificate(const std::string& dir, const std::string& name,
                                 const std::string& ca, int days, int serial,
                                 const std::string& san) {
  const std::string path = dir + "/" + name, ca_path = dir + "/" + ca;
  std::ofstream(dir + "/san.ext") << "subjectAltName="
                                  << (san.empty()
                                          ? "IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,DNS:localhost"
                                          : san)
                                  << "\n";
  absl::Status made =
      RunOpenssl(dir, {"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                       "-keyout", path + ".key", "-out", path + ".csr", "-subj", "/CN=" + name});
  if (!made.ok()) return made;
  return RunOpenssl(dir, {"x509", "-req", "-in", path + ".csr", "-CA", ca_path + ".pem", "-CAkey",
                          ca_path + ".key", "-out", path + ".pem", "-days", absl::StrCat(days),
                          "-set_serial", absl::StrCat(serial), "-extfile", dir + "/san.ext"});
}

std::shared_ptr<grpc::ChannelCredentials> TestCredentials(const std::string& dir,
                                                          const std::string& certificate,
                                                          const std::string& bearer_token) {
  TlsFiles files;
  files.ca = dir + "/ca.pem";
  if (!certificate.empty()) {
    files.cert = dir + "/" + certificate + ".pem";
    files.key = dir + "/" + certificate + ".key";
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> made = MakeChannelCredentials(files);
  if (!made.ok()) return nullptr;
  if (bearer_token.empty()) return *made;
  return grpc::CompositeChannelCredentials(*made, grpc::AccessTokenCredentials(bearer_token));
}

absl::Status ServingCluster::MakeSecrets(const ClusterOptions& options) {
  absl::Status made = MakeTestCa(dir_, "ca");
  if (made.ok()) made = MakeTestCertificate(dir_, "server", "ca", 2, 100);
  if (made.ok()) made = MakeTestCertificate(dir_, "client", "ca", 2, 200);
  if (made.ok() && options.prepare) made = options.prepare(dir_);
  if (!made.ok()) return made;
  std::ofstream(dir_ + "/transport.key") << "cluster-test-transport-key\n";
  std::ofstream(dir_ + "/cache.key") << "cluster-test-cache-key\n";
  client_ = TestCredentials(dir_, "client", options.bearer_token);
  router_side_ = TestCredentials(dir_, options.router_certificate, "");
  if (!client_ || !router_side_) return absl::InternalError("cannot load the test certificates");
  return absl::OkStatus();
}

namespace {

// `flags` with "{dir}" replaced by `dir`.
std::vector<std::string> InDir(const std::vector<std::string>& flags, const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& flag : flags) out.push_back(absl::StrReplaceAll(flag, {{"{dir}", dir}}));
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServingCluster>> ServingCluster::Start(const ClusterOptions& given) {
  std::unique_ptr<ServingCluster> cluster(new ServingCluster);
  const std::string dir = cluster->dir_ = MakeTestDir();
  if (dir.empty()) return absl::InternalError("cannot make a test folder");
  ClusterOptions options = given;
  for (std::vector<std::string>* flags : {&options.worker_flags, &options.prefill_flags,
                                          &options.decode_flags, &options.router_flags}) {
    *flags = InDir(*flags, dir);
  }
  std::vector<std::string> worker_flags = {
      "--model", options.model_dir, "--tls", "tcp", "--net-devices", "lo", "--threads", "1"};
  std::vector<std::string> prefill_flags, router_flags;
  if (options.secure) {
    absl::Status made = cluster->MakeSecrets(options);
    if (!made.ok()) return made;
    const std::vector<std::string> tls = {"--tls-cert", dir + "/server.pem",
                                          "--tls-key",  dir + "/server.key",
                                          "--tls-ca",   dir + "/ca.pem"};
    worker_flags.insert(worker_flags.end(), tls.begin(), tls.end());
    worker_flags.insert(worker_flags.end(), {"--allowed-callers", "server", "--transport-key-file",
                                             dir + "/transport.key"});
    prefill_flags = {"--cache-key-file", dir + "/cache.key"};
    router_flags = tls;
  }
  worker_flags.insert(worker_flags.end(), options.worker_flags.begin(), options.worker_flags.end());
  std::vector<std::string> prefill_addresses, decode_addresses;
  for (int i = 0; i < options.prefill_workers; ++i) {
    std::vector<std::string> flags = worker_flags;
    flags.insert(flags.end(), prefill_flags.begin(), prefill_flags.end());
    if (options.prefill_cache_dirs) {
      flags.insert(flags.end(), {"--cache-dir", absl::StrCat(dir, "/cache", i)});
    }
    flags.insert(flags.end(), options.prefill_flags.begin(), options.prefill_flags.end());
    if (i < static_cast<int>(options.prefill_flags_each.size())) {
      const std::vector<std::string>& own = options.prefill_flags_each[i];
      flags.insert(flags.end(), own.begin(), own.end());
    }
    auto started = Service::Start(Role::kPrefill, flags, absl::StrCat(dir, "/prefill", i), 0,
                                  cluster->router_side_);
    if (!started.ok()) return started.status();
    prefill_addresses.push_back((*started)->address());
    cluster->prefill_.push_back(*std::move(started));
  }
  for (int i = 0; i < options.decode_workers; ++i) {
    std::vector<std::string> flags = worker_flags;
    flags.insert(flags.end(), options.decode_flags.begin(), options.decode_flags.end());
    if (i < static_cast<int>(options.decode_flags_each.size())) {
      const std::vector<std::string>& own = options.decode_flags_each[i];
      flags.insert(flags.end(), own.begin(), own.end());
    }
    auto started = Service::Start(Role::kDecode, flags, absl::StrCat(dir, "/decode", i), 0,
                                  cluster->router_side_);
    if (!started.ok()) return started.status();
    decode_addresses.push_back((*started)->address());
    cluster->decode_.push_back(*std::move(started));
  }
  router_flags.insert(
      router_flags.end(),
      {"--model", options.model_dir, "--prefill", absl::StrJoin(prefill_addresses, ","), "--decode",
       absl::StrJoin(decode_addresses, ","), "--probe-interval-ms", "200"});
  router_flags.insert(router_flags.end(), options.router_flags.begin(), options.router_flags.end());
  auto router = Service::Start(Role::kRouter, router_flags, dir + "/router", 0, cluster->client_);
  if (!router.ok()) return router.status();
  cluster->router_ = *std::move(router);
  cluster->stub_ = v1::Yoco::NewStub(cluster->router_->Channel());
  absl::Status serving = cluster->WaitUntilServing();
  if (!serving.ok()) return serving;
  return cluster;
}

ServingCluster::~ServingCluster() {
  router_.reset();
  prefill_.clear();
  decode_.clear();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

Generated ServingCluster::Generate(const v1::GenerateRequest& request, absl::Duration timeout) {
  return testing::Generate(*stub_, request, timeout);
}

Generated Generate(v1::Yoco::Stub& stub, const v1::GenerateRequest& request, absl::Duration timeout,
                   std::atomic<int>* received) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> stream =
      stub.Generate(&context, request);
  Generated generated;
  v1::GenerateResponse event;
  while (stream->Read(&event)) {
    if (event.has_token()) {
      generated.tokens.push_back(event.token().id());
      generated.text += event.token().text();
      generated.messages.push_back(event.token());
      if (received != nullptr) ++*received;
    }
    if (event.has_finish()) generated.finish = event.finish();
  }
  generated.status = stream->Finish();
  return generated;
}

std::vector<Generated> GenerateAtOnce(v1::Yoco::Stub& stub,
                                      const std::vector<v1::GenerateRequest>& requests,
                                      absl::Duration timeout) {
  std::vector<Generated> generated(requests.size());
  std::barrier start(static_cast<std::ptrdiff_t>(requests.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      generated[i] = Generate(stub, requests[i], timeout);
    });
  }
  for (std::thread& t : threads) t.join();
  return generated;
}

ToolRun RunToCompletion(const std::string& binary, const std::vector<std::string>& args,
                        const std::string& log_path, absl::Duration timeout) {
  ToolRun run;
  auto process = ServiceProcess::Start(binary, args, log_path);
  if (!process.ok()) {
    run.output = std::string(process.status().message());
    return run;
  }
  absl::StatusOr<int> status = (*process)->Wait(timeout);
  run.status = status.ok() ? *status : -1;
  run.output = (*process)->Log();
  return run;
}

std::vector<std::string> ServingCluster::CliFlags() const {
  std::vector<std::string> flags = {"--router", router_->address()};
  if (client_) {
    flags.insert(flags.end(), {"--tls-ca", dir_ + "/ca.pem", "--tls-cert", dir_ + "/client.pem",
                               "--tls-key", dir_ + "/client.key"});
  }
  return flags;
}

namespace {

// Whether a loopback listener could bind `port` now (0: any port; the one bound is returned).
int BindablePort(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t size = sizeof(address);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    bound = ntohs(address.sin_port);
  }
  close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range (ports it hands to bind(0) and to every
// outgoing connection's local end).
int EphemeralRangeStart() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  return low;
}

}  // namespace

int FreePort() {
  // A port from the ephemeral range can be taken between this call and the service's bind: by a
  // service binding port 0, or as the local end of any connection a test process opens (a test's
  // HTTP port was taken so, and its router exited "Address already in use"). So the port comes
  // from below that range, at random (tests run in parallel processes), checked free now, and
  // never twice in a process.
  static absl::Mutex mu(absl::kConstInit);
  static std::set<int>* given = new std::set<int>();
  static std::mt19937* random = new std::mt19937(std::random_device{}());
  absl::MutexLock lock(&mu);
  constexpr int kLowest = 10000;
  const int high = EphemeralRangeStart() - 1;
  for (int attempt = 0; high > kLowest && attempt < 1000; ++attempt) {
    const int port = std::uniform_int_distribution<int>(kLowest, high)(*random);
    if (given->count(port) == 0 && BindablePort(port) == port) {
      given->insert(port);
      return port;
    }
  }
  for (int attempt = 0; attempt < 1000; ++attempt) {  // a kernel whose range starts low
    const int port = BindablePort(0);
    if (port == 0) return 0;
    if (given->insert(port).second) return port;
  }
  return 0;
}

absl::Status ServingCluster::WaitUntilServing(absl::Duration timeout) {
  grpc::Status last;
  const bool served = WaitFor(
      [&] {
        last = Generate(Request({0, 5}, 1), absl::Seconds(20)).status;
        return last.ok();
      },
      timeout);
  if (served) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("the router serves nothing: ", last.error_code(), " ",
                                             last.error_message(), "\n", Logs()));
}

std::string ServingCluster::Logs() const {
  std::string logs;
  auto add = [&](const std::string& name, const std::unique_ptr<Service>& s) {
    if (s) absl::StrAppend(&logs, "--- ", name, ":\n", s->process().LogTail(), "\n");
  };
  add("router", router_);
  for (size_t i = 0; i < prefill_.size(); ++i) add(absl::StrCat("prefill", i), prefill_[i]);
  for (size_t i = 0; i < decode_.size(); ++i) add(absl::StrCat("decode", i), decode_[i]);
  return logs;
}

}  // namespace yoco::testing
