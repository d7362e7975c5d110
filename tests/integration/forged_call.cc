// A hostile client of a prefill worker's internal API: Prefill and CopySnapshot calls whose UCX
// address is forged (random bytes behind our envelope's magic, and an envelope whose tag is
// computed without the cluster's transport key). Each must be refused with INVALID_ARGUMENT
// before any byte reaches UCX (a forged address used to abort the worker in ucp_address_unpack).
// Prints one line per call; exits 0 only when every call was refused that way.
//   forged_call PREFILL_HOST:PORT HANDLE [CA CERT KEY]
// HANDLE: a snapshot that worker holds. With CA, CERT and KEY the calls come over mutual TLS
// with a certificate the cluster's CA signed: an insider's, which the envelope must still stop.
//   forged_call local-prefill DECODE_HOST:PORT (yes|no)
// Decode calls that ask a decode worker to prefill prompts no router would send: each must be
// refused with INVALID_ARGUMENT (yes: the worker prefills) or FAILED_PRECONDITION (no).
//   forged_call outsider PREFILL_HOST:PORT DECODE_HOST:PORT CA CERT KEY [CODE]
// Every method of both workers' API with a certificate the CA signed but the workers' allow-list
// does not name (a tenant's): each must be PERMISSION_DENIED (or the gRPC status CODE given,
// e.g. 14 for a certificate whose CA the workers do not trust), with no tokens streamed.
//   forged_call cut-stream ROUTER DECODE CA CLIENT_CERT CLIENT_KEY INSIDER_CERT INSIDER_KEY N IDS
// A client's Generate (prompt IDS, comma-separated, N greedy tokens, a request id anyone could
// guess) while others ask the decode worker to cancel that request id, with the client's and with
// the router's own certificate: neither may cut the stream. Prints the tokens (comma-separated);
// exits 0 only when both cancels were refused and the stream ended with N tokens, reason LENGTH.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/rpc/tls_credentials.h"
#include "lib/transport/transport_address.h"
#include "yoco/v1/worker.grpc.pb.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

int ForgedLocalPrefills(const std::string& address, bool prefills) {
  auto stub = yoco::v1::DecodeWorker::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  struct Case {
    std::string name;
    std::vector<int32_t> prompt;
    uint32_t max_new_tokens = 8;
    float temperature = 0;
  };
  const std::vector<Case> cases = {
      {"token-beyond-the-vocabulary", {0, 1 << 30}},
      {"negative-token", {0, -7}},
      {"longer-than-max-seq-len", std::vector<int32_t>(100000, 5)},
      {"negative-temperature", {0, 5}, 8, -1.0f},
      {"nan-temperature", {0, 5}, 8, std::numeric_limits<float>::quiet_NaN()},
  };
  int failures = 0;
  for (const Case& c : cases) {
    yoco::v1::DecodeRequest request;
    request.set_request_id("forged");
    for (int32_t t : c.prompt) request.add_prompt(t);
    request.set_max_new_tokens(c.max_new_tokens);
    request.mutable_sampling()->set_temperature(c.temperature);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = stub->Decode(&context, request);
    yoco::v1::DecodeEvent event;
    int events = 0;
    while (stream->Read(&event)) ++events;
    const grpc::Status st = stream->Finish();
    const grpc::StatusCode want =
        prefills ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::FAILED_PRECONDITION;
    const bool refused = st.error_code() == want && events == 0;
    std::cout << (refused ? "refused " : "ACCEPTED ") << c.name << ": " << st.error_code() << " "
              << st.error_message() << " (" << events << " events)\n";
    if (!refused) ++failures;
  }
  return failures == 0 ? 0 : 1;
}

std::shared_ptr<grpc::ChannelCredentials> MutualTls(const char* ca, const char* cert,
                                                    const char* key) {
  yoco::TlsFiles tls;
  tls.ca = ca;
  tls.cert = cert;
  tls.key = key;
  auto made = yoco::MakeChannelCredentials(tls);
  if (!made.ok()) {
    std::cerr << made.status().message() << "\n";
    std::exit(2);
  }
  return *made;
}

std::chrono::system_clock::time_point In30s() {
  return std::chrono::system_clock::now() + std::chrono::seconds(30);
}

int Outsider(const std::string& prefill_address, const std::string& decode_address,
             const std::shared_ptr<grpc::ChannelCredentials>& credentials,
             grpc::StatusCode expected) {
  auto prefill =
      yoco::v1::PrefillWorker::NewStub(grpc::CreateChannel(prefill_address, credentials));
  auto decode = yoco::v1::DecodeWorker::NewStub(grpc::CreateChannel(decode_address, credentials));
  std::vector<std::pair<std::string, grpc::Status>> answers;
  auto call = [&](const std::string& name, auto invoke) {
    grpc::ClientContext context;
    context.set_deadline(In30s());
    answers.emplace_back(name, invoke(&context));
  };
  call("PrefillWorker.Prefill", [&](grpc::ClientContext* c) {
    yoco::v1::PrefillRequest request;
    request.add_prompt(0);
    request.add_prompt(5);
    request.set_max_new_tokens(1);
    yoco::v1::PrefillResponse response;
    return prefill->Prefill(c, request, &response);
  });
  int first_tokens = 0;
  call("PrefillWorker.PrefillStream", [&](grpc::ClientContext* c) {
    yoco::v1::PrefillRequest request;
    request.add_prompt(0);
    request.add_prompt(5);
    request.set_max_new_tokens(1);
    auto stream = prefill->PrefillStream(c, request);
    yoco::v1::PrefillResponse message;
    while (stream->Read(&message)) ++first_tokens;
    return stream->Finish();
  });
  call("PrefillWorker.Score", [&](grpc::ClientContext* c) {
    yoco::v1::WorkerScoreRequest request;
    request.add_tokens(0);
    request.add_tokens(5);
    yoco::v1::ScoreResponse response;
    return prefill->Score(c, request, &response);
  });
  call("PrefillWorker.GetWorkerInfo", [&](grpc::ClientContext* c) {
    yoco::v1::WorkerInfo response;
    return prefill->GetWorkerInfo(c, {}, &response);
  });
  call("PrefillWorker.Precache", [&](grpc::ClientContext* c) {
    yoco::v1::WorkerPrecacheRequest request;
    for (int i = 0; i < 200; ++i) request.add_tokens(i % 100);
    yoco::v1::PrecacheResponse response;
    return prefill->Precache(c, request, &response);
  });
  int progress = 0;
  call("PrefillWorker.PrecacheWithProgress", [&](grpc::ClientContext* c) {
    yoco::v1::WorkerPrecacheRequest request;
    for (int i = 0; i < 200; ++i) request.add_tokens(i % 100);
    auto stream = prefill->PrecacheWithProgress(c, request);
    yoco::v1::PrecacheProgress message;
    while (stream->Read(&message)) ++progress;
    return stream->Finish();
  });
  call("PrefillWorker.ListCache", [&](grpc::ClientContext* c) {
    yoco::v1::ListCacheResponse response;
    return prefill->ListCache(c, {}, &response);
  });
  call("PrefillWorker.EvictCache", [&](grpc::ClientContext* c) {
    yoco::v1::EvictCacheRequest request;
    request.set_all(true);
    yoco::v1::EvictCacheResponse response;
    return prefill->EvictCache(c, request, &response);
  });
  int cache_events = 0;
  call("PrefillWorker.WatchCache", [&](grpc::ClientContext* c) {
    auto stream = prefill->WatchCache(c, {});
    yoco::v1::CacheEvent event;
    while (stream->Read(&event)) ++cache_events;
    return stream->Finish();
  });
  call("PrefillWorker.CopySnapshot", [&](grpc::ClientContext* c) {
    yoco::v1::CopySnapshotRequest request;
    request.set_handle(std::string(64, '0'));
    yoco::v1::CopySnapshotResponse response;
    return prefill->CopySnapshot(c, request, &response);
  });
  call("DecodeWorker.GetWorkerInfo", [&](grpc::ClientContext* c) {
    yoco::v1::WorkerInfo response;
    return decode->GetWorkerInfo(c, {}, &response);
  });
  call("DecodeWorker.EndChoice", [&](grpc::ClientContext* c) {
    yoco::v1::EndChoiceRequest request;
    request.set_call_id(1);
    yoco::v1::EndChoiceResponse response;
    return decode->EndChoice(c, request, &response);
  });
  int events = 0;
  call("DecodeWorker.Decode", [&](grpc::ClientContext* c) {
    yoco::v1::DecodeRequest request;
    request.add_prompt(0);
    request.add_prompt(5);
    request.set_max_new_tokens(4);
    auto stream = decode->Decode(c, request);
    yoco::v1::DecodeEvent event;
    while (stream->Read(&event)) ++events;
    return stream->Finish();
  });
  int failures = 0;
  for (const auto& [name, status] : answers) {
    const bool refused = status.error_code() == expected;
    std::cout << (refused ? "refused " : "ANSWERED ") << name << ": " << status.error_code() << " "
              << status.error_message() << "\n";
    if (!refused) ++failures;
  }
  if (progress != 0) {
    std::cout << "STREAMED " << progress << " pre-cache progress messages\n";
    ++failures;
  }
  if (first_tokens != 0) {
    std::cout << "STREAMED " << first_tokens << " prefill answers\n";
    ++failures;
  }
  if (events != 0) {
    std::cout << "STREAMED " << events << " decode events\n";
    ++failures;
  }
  if (cache_events != 0) {
    std::cout << "STREAMED " << cache_events << " cache events\n";
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}

// DecodeWorker.Cancel as it was: a CancelRequest is one string field 1, the request id, which is
// also how a DecodeRequest holding only its request id serialises.
grpc::Status CancelByRequestId(const std::string& decode_address,
                               const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                               const std::string& request_id) {
  yoco::v1::DecodeRequest cancel;
  cancel.set_request_id(request_id);
  const std::string bytes = cancel.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::GenericStub stub(grpc::CreateChannel(decode_address, credentials));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(In30s());
  auto call = stub.PrepareUnaryCall(&context, "/yoco.v1.DecodeWorker/Cancel", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

int CutStream(char** argv) {
  const std::string router_address = argv[2], decode_address = argv[3];
  const auto client = MutualTls(argv[4], argv[5], argv[6]);
  const auto insider = MutualTls(argv[4], argv[7], argv[8]);
  uint32_t max_tokens = 0;
  if (!absl::SimpleAtoi(argv[9], &max_tokens)) return 2;
  const std::string request_id = "victim-request";
  yoco::v1::GenerateRequest request;
  request.set_request_id(request_id);
  for (absl::string_view id : absl::StrSplit(argv[10], ',')) {
    int32_t token;
    if (!absl::SimpleAtoi(id, &token)) return 2;
    request.mutable_tokens()->add_ids(token);
  }
  request.mutable_sampling()->set_max_new_tokens(max_tokens);
  auto router = yoco::v1::Yoco::NewStub(grpc::CreateChannel(router_address, client));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto stream = router->Generate(&context, request);
  yoco::v1::GenerateResponse event;
  std::vector<int32_t> tokens;
  int failures = 0;
  yoco::v1::FinishReason reason = yoco::v1::FINISH_REASON_UNSPECIFIED;
  while (stream->Read(&event)) {
    if (event.has_finish()) {
      reason = event.finish().reason();
      continue;
    }
    tokens.push_back(event.token().id());
    if (tokens.size() != 2) continue;
    // The stream runs on the decode worker now: ask it to cut it, as a stranger and as the
    // router itself would.
    for (const auto& [who, credentials] :
         {std::pair{"client", client}, std::pair{"router", insider}}) {
      const grpc::Status st = CancelByRequestId(decode_address, credentials, request_id);
      std::cerr << (st.ok() ? "CANCEL ANSWERED " : "cancel refused ") << "(" << who
                << "'s certificate): " << st.error_code() << " " << st.error_message() << "\n";
      if (st.ok()) ++failures;
    }
  }
  const grpc::Status st = stream->Finish();
  std::cout << absl::StrJoin(tokens, ",") << "\n";
  if (!st.ok() || tokens.size() != max_tokens || reason != yoco::v1::FINISH_REASON_LENGTH) {
    std::cerr << "the stream ended with " << st.error_code() << " " << st.error_message()
              << " after " << tokens.size() << " of " << max_tokens << " tokens, reason " << reason
              << "\n";
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "local-prefill") {
    return ForgedLocalPrefills(argv[2], std::string(argv[3]) == "yes");
  }
  if ((argc == 7 || argc == 8) && std::string(argv[1]) == "outsider") {
    int code = grpc::StatusCode::PERMISSION_DENIED;
    if (argc == 8 && !absl::SimpleAtoi(argv[7], &code)) return 2;
    return Outsider(argv[2], argv[3], MutualTls(argv[4], argv[5], argv[6]),
                    static_cast<grpc::StatusCode>(code));
  }
  if (argc == 11 && std::string(argv[1]) == "cut-stream") return CutStream(argv);
  if (argc != 3 && argc != 6) {
    std::cerr << "usage: forged_call PREFILL_HOST:PORT HANDLE [CA CERT KEY] (modes: see the top of "
                 "forged_call.cc)\n";
    return 2;
  }
  const std::shared_ptr<grpc::ChannelCredentials> credentials =
      argc == 6 ? MutualTls(argv[3], argv[4], argv[5]) : grpc::InsecureChannelCredentials();
  auto stub = yoco::v1::PrefillWorker::NewStub(grpc::CreateChannel(argv[1], credentials));
  // The envelope's magic and header followed by garbage; then a well-formed envelope around a
  // random "UCX address" tagged under the empty key instead of the cluster's key.
  const std::vector<std::pair<std::string, std::string>> forged = {
      {"random-after-magic", "YUCX" + RandomBytes(316, 1)},
      {"tagged-without-the-key",
       yoco::SealTransportAddress({1, 2, RandomBytes(300, 2)}, /*key=*/"")},
  };
  int failures = 0;
  for (const auto& [name, address] : forged) {
    yoco::v1::PrefillRequest prefill;
    prefill.add_prompt(0);
    prefill.add_prompt(5);
    prefill.set_decode_ucx_address(address);
    prefill.set_max_new_tokens(8);
    yoco::v1::PrefillResponse prefilled;
    grpc::ClientContext prefill_context;
    const grpc::Status a = stub->Prefill(&prefill_context, prefill, &prefilled);

    yoco::v1::CopySnapshotRequest copy;
    copy.set_handle(argv[2]);
    copy.set_target_ucx_address(address);
    yoco::v1::CopySnapshotResponse copied;
    grpc::ClientContext copy_context;
    const grpc::Status b = stub->CopySnapshot(&copy_context, copy, &copied);

    for (const auto& [call, status] : {std::pair{"Prefill", a}, std::pair{"CopySnapshot", b}}) {
      const bool refused = status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
      std::cout << (refused ? "refused " : "ACCEPTED ") << call << " " << name << ": "
                << status.error_code() << " " << status.error_message() << "\n";
      if (!refused) ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
