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
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/rpc/tls_credentials.h"
#include "lib/transport/transport_address.h"
#include "yoco/v1/worker.grpc.pb.h"

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

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "local-prefill") {
    return ForgedLocalPrefills(argv[2], std::string(argv[3]) == "yes");
  }
  if (argc != 3 && argc != 6) {
    std::cerr << "usage: forged_call PREFILL_HOST:PORT HANDLE [CA CERT KEY]\n";
    return 2;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (argc == 6) {
    yoco::TlsFiles tls;
    tls.ca = argv[3];
    tls.cert = argv[4];
    tls.key = argv[5];
    auto made = yoco::MakeChannelCredentials(tls);
    if (!made.ok()) {
      std::cerr << made.status().message() << "\n";
      return 2;
    }
    credentials = *made;
  }
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
