// yoco-cli: a client of the router's public API. Before the command, --tls-ca FILE calls over
// TLS (verifying the server against that CA), --tls-cert FILE --tls-key FILE present a
// client certificate (mutual TLS), and --token-file FILE sends a tenant's bearer token.
//   yoco-cli --router HOST:PORT generate (--prompt TEXT | --prompt-file FILE | --tokens 0,17,...)
//            --max-new-tokens N
//            [--temperature T] [--top-k K] [--top-p P] [--seed S] [--stop-at-eos] [--stats]
//            [--timeout-ms MS]  (the call's deadline, default 10 minutes) [--stop-string S]
//            [--cache-salt S] [--json-object | --json-schema FILE | --regex PATTERN]
//            (structured output: any JSON object, one valid under the schema in FILE, or text
//            the pattern matches whole)
//   yoco-cli --router HOST:PORT precache (--file DOC.txt | --text TEXT | --tokens 0,17,...)
//            [--pin] [--ttl-seconds N] [--cache-salt S] [--progress]
//            (--progress, or stderr a terminal: how far the prefill has come, on stderr)
//   yoco-cli --router HOST:PORT list-cache [--cache-salt S]
//   yoco-cli --router HOST:PORT evict-cache (--handle H | --all) [--cache-salt S]
//   yoco-cli --router HOST:PORT health [--service NAME] [--timeout-ms MS] [--watch]
//            (any YOCO service's address; "" is liveness, the role's service name readiness;
//            --watch prints every change until the server ends the stream)
// generate streams token ids (comma-separated, with --tokens) or text (with --prompt or
// --prompt-file) to stdout;
// --stats prints the final usage, cache and timings as one JSON line on stderr. The cache
// commands print one JSON line on stdout.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/files/bounded_file.h"
#include "lib/files/key_file.h"
#include "lib/rpc/grpc_server.h"
#include "lib/rpc/grpc_status.h"
#include "lib/rpc/health_check.h"
#include "lib/rpc/tls_credentials.h"
#include "tools/yoco/command_line.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace {

const char* ReasonName(yoco::v1::FinishReason r) {
  switch (r) {
    case yoco::v1::FINISH_REASON_LENGTH:
      return "length";
    case yoco::v1::FINISH_REASON_STOP:
      return "stop";
    case yoco::v1::FINISH_REASON_EOS:
      return "eos";
    case yoco::v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

int Fail(const std::string& message) {
  std::cerr << "yoco-cli: " << message << "\n";
  return 1;
}

int Fail(const grpc::Status& st) {
  return Fail(absl::StrFormat("%d: %s", st.error_code(), st.error_message()));
}

// Plaintext unless --tls-ca (and, for mutual TLS, --tls-cert and --tls-key) came first.
std::shared_ptr<grpc::ChannelCredentials>& Credentials() {
  static std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  return credentials;
}

std::unique_ptr<yoco::v1::Yoco::Stub> Connect(const std::string& router) {
  return yoco::v1::Yoco::NewStub(grpc::CreateChannel(router, Credentials()));
}

// --token-file: the bearer token every call sends (a router with --tenants needs one, unless
// the client certificate names the tenant).
std::string& BearerToken() {
  static std::string token;
  return token;
}

// Every call's context: the token, when there is one.
void Authorize(grpc::ClientContext& context) {
  if (!BearerToken().empty()) context.AddMetadata("authorization", "Bearer " + BearerToken());
}

// A prompt or document from a file: a regular file only (a FIFO would block, /dev/zero never
// end), no larger than one request to the router can carry.
absl::StatusOr<std::string> ReadTextFile(const std::string& path, const char* flag) {
  constexpr uint64_t kMaxBytes = yoco::kMaxGrpcMessageBytes - (1 << 20);  // room for the rest
  absl::StatusOr<std::string> text = yoco::ReadBoundedFile(path, kMaxBytes);
  if (text.ok()) return text;
  if (text.status().code() == absl::StatusCode::kInvalidArgument &&
      absl::StrContains(text.status().message(), "-byte limit")) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, " holds more than the ", kMaxBytes >> 20,
        " MiB one request to the router carries: split the document, and pre-cache its first "
        "part before asking about the whole"));
  }
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", text.status().message()));
}

int Precache(const std::string& router, const std::vector<std::string>& args) {
  auto cl = yoco::CommandLine::Parse(args, {"file", "text", "tokens", "ttl-seconds", "cache-salt"},
                                     {"pin", "progress"});
  if (!cl.ok()) return Fail(std::string(cl.status().message()));
  yoco::v1::PrecacheRequest request;
  if (cl->Has("file") + cl->Has("text") + cl->Has("tokens") != 1) {
    return Fail("give exactly one of --file, --text and --tokens");
  }
  if (cl->Has("tokens")) {
    auto ids = cl->IntList("tokens");
    if (!ids.ok()) return Fail(std::string(ids.status().message()));
    request.mutable_tokens()->mutable_ids()->Add(ids->begin(), ids->end());
  } else if (cl->Has("text")) {
    request.set_text(*cl->String("text"));
  } else {
    absl::StatusOr<std::string> text = ReadTextFile(*cl->String("file"), "--file");
    if (!text.ok()) return Fail(std::string(text.status().message()));
    request.set_text(*std::move(text));
  }
  auto ttl = cl->Int("ttl-seconds", 0);
  if (!ttl.ok()) return Fail(std::string(ttl.status().message()));
  if (*ttl < 0) return Fail("--ttl-seconds must be >= 0");
  request.set_ttl_seconds(static_cast<uint32_t>(*ttl));
  request.set_pin(cl->Has("pin"));
  if (cl->Has("cache-salt")) request.set_cache_salt(*cl->String("cache-salt"));
  yoco::v1::PrecacheResponse response;
  grpc::Status st = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
  const bool terminal = isatty(STDERR_FILENO) != 0;
  bool any = false;
  if (cl->Has("progress") || terminal) {
    grpc::ClientContext context;
    Authorize(context);
    auto reader = Connect(router)->PrecacheWithProgress(&context, request);
    yoco::v1::PrecacheProgress message;
    while (reader->Read(&message)) {
      any = true;
      if (message.has_done()) response = message.done();
      const uint32_t total = std::max<uint32_t>(message.tokens_total(), 1);
      std::cerr << absl::StrFormat("pre-cache: %3d%% (%d of %d tokens)",
                                   uint64_t{message.tokens_done()} * 100 / total,
                                   message.tokens_done(), message.tokens_total())
                << (terminal && !message.has_done() ? "\r" : "\n") << std::flush;
    }
    st = reader->Finish();
  }
  // A router of an older version has no streaming method: ask it the plain way.
  if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED && !any) {
    grpc::ClientContext context;
    Authorize(context);
    st = Connect(router)->Precache(&context, request, &response);
  }
  if (!st.ok()) return Fail(st);
  std::cout << absl::StrFormat(
                   R"({"handle": "%s", "tokens": %d, "cached_tokens": %d, "bytes": %d, )"
                   R"("worker": "%s", "disk_error": "%s"})",
                   response.handle(), response.tokens(), response.cached_tokens(), response.bytes(),
                   response.worker(), absl::CHexEscape(response.disk_error()))
            << "\n";
  if (!response.disk_error().empty()) {
    std::cerr << "yoco-cli: warning: held in memory only: " << response.disk_error() << "\n";
  }
  return 0;
}

int ListCache(const std::string& router, const std::vector<std::string>& args) {
  auto cl = yoco::CommandLine::Parse(args, {"cache-salt"}, {});
  if (!cl.ok()) return Fail(std::string(cl.status().message()));
  yoco::v1::ListCacheRequest request;
  if (cl->Has("cache-salt")) request.set_cache_salt(*cl->String("cache-salt"));
  grpc::ClientContext context;
  Authorize(context);
  yoco::v1::ListCacheResponse response;
  const grpc::Status st = Connect(router)->ListCache(&context, request, &response);
  if (!st.ok()) return Fail(st);
  std::string out = R"({"entries": [)";
  for (int i = 0; i < response.entries_size(); ++i) {
    const auto& e = response.entries(i);
    out += absl::StrFormat(
        R"(%s{"handle": "%s", "tokens": %d, "bytes": %d, "tier": "%s", "pinned": %s, "hits": %d, "worker": "%s"})",
        i ? ", " : "", e.handle(), e.tokens(), e.bytes(), e.tier(), e.pinned() ? "true" : "false",
        e.hits(), e.worker());
  }
  std::cout << out << "]}\n";
  return 0;
}

int EvictCache(const std::string& router, const std::vector<std::string>& args) {
  auto cl = yoco::CommandLine::Parse(args, {"handle", "cache-salt"}, {"all"});
  if (!cl.ok()) return Fail(std::string(cl.status().message()));
  if (cl->Has("handle") == cl->Has("all")) return Fail("give exactly one of --handle and --all");
  yoco::v1::EvictCacheRequest request;
  if (cl->Has("all")) {
    request.set_all(true);
  } else {
    request.set_handle(*cl->String("handle"));
  }
  if (cl->Has("cache-salt")) request.set_cache_salt(*cl->String("cache-salt"));
  grpc::ClientContext context;
  Authorize(context);
  yoco::v1::EvictCacheResponse response;
  const grpc::Status st = Connect(router)->EvictCache(&context, request, &response);
  if (!st.ok()) return Fail(st);
  std::cout << absl::StrFormat(R"({"evicted": %d})", response.evicted()) << "\n";
  return 0;
}

// Health/Watch as a generic streaming call: prints every status the server sends until the
// stream ends (the server shutting down ends it).
class HealthWatch : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  HealthWatch(grpc::GenericStub& stub, const std::string& service) {
    request_ = yoco::HealthCheckRequest(service);
    stub.PrepareBidiStreamingCall(&context_, "/grpc.health.v1.Health/Watch", grpc::StubOptions(),
                                  this);
    StartWrite(&request_);
    StartRead(&response_);
    StartCall();
  }
  void OnWriteDone(bool) override { StartWritesDone(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::cout << yoco::HealthStateName(yoco::ParseHealthCheckResponse(response_)) << std::endl;
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { done_.set_value(status); }
  grpc::Status Wait() { return done_.get_future().get(); }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_, response_;
  std::promise<grpc::Status> done_;
};

int Health(const std::string& address, const std::vector<std::string>& args) {
  auto cl = yoco::CommandLine::Parse(args, {"service", "timeout-ms"}, {"watch"});
  if (!cl.ok()) return Fail(std::string(cl.status().message()));
  const std::string service = cl->Has("service") ? *cl->String("service") : "";
  if (service.size() > 127) return Fail("--service: at most 127 bytes");
  absl::StatusOr<int64_t> timeout_ms = cl->Int("timeout-ms", 5000);
  if (!timeout_ms.ok()) return Fail(std::string(timeout_ms.status().message()));
  if (cl->Has("watch")) {
    grpc::GenericStub stub(grpc::CreateChannel(address, Credentials()));
    HealthWatch watch(stub, service);
    const grpc::Status st = watch.Wait();
    return st.ok() || st.error_code() == grpc::StatusCode::CANCELLED ? 0 : Fail(st);
  }
  absl::StatusOr<yoco::HealthState> state = yoco::CheckHealth(
      grpc::CreateChannel(address, Credentials()), service, absl::Milliseconds(*timeout_ms));
  if (!state.ok()) return Fail(yoco::ToGrpcStatus(state.status()));
  std::cout << yoco::HealthStateName(*state) << "\n";
  return *state == yoco::HealthState::kServing ? 0 : 1;
}

int Generate(const std::string& router, const std::vector<std::string>& args) {
  auto cl = yoco::CommandLine::Parse(
      args,
      {"prompt", "prompt-file", "tokens", "max-new-tokens", "temperature", "top-k", "top-p", "seed",
       "timeout-ms", "stop-string", "cache-salt", "json-schema", "regex"},
      {"stats", "stop-at-eos", "json-object"});
  if (!cl.ok()) return Fail(std::string(cl.status().message()));
  yoco::v1::GenerateRequest request;
  if (cl->Has("cache-salt")) request.set_cache_salt(*cl->String("cache-salt"));
  const bool tokens_mode = cl->Has("tokens");
  if (cl->Has("tokens") + cl->Has("prompt") + cl->Has("prompt-file") != 1) {
    return Fail("give exactly one of --prompt, --prompt-file and --tokens");
  }
  if (tokens_mode) {
    auto ids = cl->IntList("tokens");
    if (!ids.ok()) return Fail(std::string(ids.status().message()));
    request.mutable_tokens()->mutable_ids()->Add(ids->begin(), ids->end());
  } else if (cl->Has("prompt-file")) {
    absl::StatusOr<std::string> text = ReadTextFile(*cl->String("prompt-file"), "--prompt-file");
    if (!text.ok()) return Fail(std::string(text.status().message()));
    request.set_text(*std::move(text));
  } else {
    request.set_text(*cl->String("prompt"));
  }
  auto max_new = cl->Int("max-new-tokens", std::nullopt);
  auto temperature = cl->Double("temperature", 0.0);
  auto top_k = cl->Int("top-k", 0);
  auto top_p = cl->Double("top-p", 1.0);
  auto seed = cl->Uint64("seed", 0);
  auto timeout_ms = cl->Int("timeout-ms", 600000);
  for (const absl::Status& st :
       {max_new.status(), temperature.status(), top_k.status(), top_p.status(), seed.status()}) {
    if (!st.ok()) return Fail(std::string(st.message()));
  }
  if (*max_new < 1) return Fail("--max-new-tokens must be >= 1");
  auto* s = request.mutable_sampling();
  s->set_max_new_tokens(static_cast<uint32_t>(*max_new));
  s->set_temperature(static_cast<float>(*temperature));
  s->set_top_k(static_cast<int32_t>(*top_k));
  s->set_top_p(static_cast<float>(*top_p));
  s->set_seed(*seed);
  s->set_stop_at_eos(cl->Has("stop-at-eos"));
  if (cl->Has("stop-string")) s->add_stop_strings(*cl->String("stop-string"));
  if (cl->Has("json-object") + cl->Has("json-schema") + cl->Has("regex") > 1) {
    return Fail("give at most one of --json-object, --json-schema and --regex");
  }
  if (cl->Has("json-object")) s->mutable_response_format()->set_json_object(true);
  if (cl->Has("json-schema")) {
    absl::StatusOr<std::string> schema = ReadTextFile(*cl->String("json-schema"), "--json-schema");
    if (!schema.ok()) return Fail(std::string(schema.status().message()));
    s->mutable_response_format()->set_json_schema(*std::move(schema));
  }
  if (cl->Has("regex")) s->mutable_response_format()->set_regex(*cl->String("regex"));

  auto stub = Connect(router);
  grpc::ClientContext context;
  Authorize(context);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(*timeout_ms));
  auto stream = stub->Generate(&context, request);
  yoco::v1::GenerateResponse response;
  yoco::v1::Finish finish;
  bool first = true;
  while (stream->Read(&response)) {
    if (response.has_token()) {
      if (tokens_mode) {
        std::cout << (first ? "" : ",") << response.token().id();
      } else {
        std::cout << response.token().text();
      }
      std::cout.flush();
      first = false;
    } else if (response.has_finish()) {
      finish = response.finish();
    }
  }
  std::cout << "\n";
  const grpc::Status st = stream->Finish();
  if (!st.ok()) return Fail(st);
  if (cl->Has("stats")) {
    std::cerr
        << absl::StrFormat(
               R"({"prompt_tokens": %d, "cached_prompt_tokens": %d, "generated_tokens": %d, "ttft_ms": %.3f, )"
               R"("prefill_ms": %.3f, "transfer_ms": %.3f, "decode_ms": %.3f, "transfer_bytes": %d, "finish_reason": "%s", )"
               R"("cache_tier": "%s", "cache_miss_reason": "%s", "local_prefill": %s})",
               finish.usage().prompt_tokens(), finish.usage().cached_prompt_tokens(),
               finish.usage().generated_tokens(), finish.timings().ttft_ms(),
               finish.timings().prefill_ms(), finish.timings().transfer_ms(),
               finish.timings().decode_ms(), finish.transfer_bytes(), ReasonName(finish.reason()),
               finish.cache_tier(), finish.cache_miss_reason(),
               finish.local_prefill() ? "true" : "false")
        << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string router;
  yoco::TlsFiles tls;
  tls.reload = absl::Hours(24);  // one command: read once
  std::string token_file;
  while (args.size() >= 2 &&
         (args[0] == "--router" || args[0] == "--tls-ca" || args[0] == "--tls-cert" ||
          args[0] == "--tls-key" || args[0] == "--token-file")) {
    std::string& value = args[0] == "--router"     ? router
                         : args[0] == "--tls-ca"   ? tls.ca
                         : args[0] == "--tls-cert" ? tls.cert
                         : args[0] == "--tls-key"  ? tls.key
                                                   : token_file;
    value = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (!token_file.empty()) {
    // A token file is a secret like a key file: same rules (regular file, bounded, no trailing
    // newline).
    auto token = yoco::ReadKeyFile(token_file, "--token-file");
    if (!token.ok()) return Fail(std::string(token.status().message()));
    BearerToken() = *token;
  }
  if (tls.enabled()) {
    auto credentials = yoco::MakeChannelCredentials(tls);
    if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
    Credentials() = *credentials;
  }
  const std::string command = args.empty() ? "" : args[0];
  if (!args.empty()) args.erase(args.begin());
  if (!router.empty()) {
    if (command == "generate") return Generate(router, args);
    if (command == "precache") return Precache(router, args);
    if (command == "list-cache") return ListCache(router, args);
    if (command == "evict-cache") return EvictCache(router, args);
    if (command == "health") return Health(router, args);
  }
  std::ostream& out = (command == "--help" || command == "help") ? std::cout : std::cerr;
  out << "usage: yoco-cli --router HOST:PORT generate (--prompt TEXT | --prompt-file FILE | "
         "--tokens 0,17,...) "
         "--max-new-tokens N [--temperature T] [--top-k K] [--top-p P] [--seed S] "
         "[--stop-at-eos] [--stop-string S] [--cache-salt S] [--stats] [--timeout-ms MS] "
         "[--json-object | --json-schema FILE | --regex PATTERN]\n"
         "       yoco-cli --router HOST:PORT precache (--file DOC.txt | --text TEXT | "
         "--tokens 0,17,...) [--pin] [--ttl-seconds N] [--cache-salt S] [--progress]\n"
         "       yoco-cli --router HOST:PORT list-cache [--cache-salt S]\n"
         "       yoco-cli --router HOST:PORT evict-cache (--handle H | --all) [--cache-salt S]\n"
         "       yoco-cli --router HOST:PORT health [--service NAME] [--timeout-ms MS] "
         "[--watch]\n"
         "  before the command: --tls-ca FILE (TLS), --tls-cert FILE --tls-key FILE (mutual TLS), "
         "--token-file FILE (a tenant's bearer token)\n";
  return &out == &std::cout ? 0 : 2;
}
