// Seeded and greedy streams under load give the in-process engine's tokens: STREAMS Generate
// calls opened at once through the router (every other one greedy, the rest sampled at
// temperature 0.9, top-k 50, top-p 0.95 with its own seed; prompts of 20 to 200 tokens), each
// compared with the same request run alone in this process on the same model, weight format and
// K/V dtype. Prints one line per stream that differs and a summary; exits 0 only when all agree.
//   concurrent_streams ROUTER_HOST:PORT MODEL_DIR WEIGHTS KV_DTYPE STREAMS TOKENS
#include <grpcpp/grpcpp.h>

#include <barrier>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "lib/engine/cpu_backend.h"
#include "lib/engine/generation.h"
#include "lib/engine/model.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace {

struct Request {
  std::vector<int32_t> prompt;
  yoco::SamplingParams sampling;
};

// The served tokens, or the call's error.
struct Served {
  std::vector<int32_t> tokens;
  grpc::Status status;
};

Served Serve(yoco::v1::Yoco::Stub& stub, const Request& r, int tokens) {
  yoco::v1::GenerateRequest request;
  for (int32_t id : r.prompt) request.mutable_tokens()->add_ids(id);
  yoco::v1::SamplingParams* s = request.mutable_sampling();
  s->set_temperature(r.sampling.temperature);
  s->set_top_k(r.sampling.top_k);
  s->set_top_p(r.sampling.top_p);
  s->set_seed(r.sampling.seed);
  s->set_max_new_tokens(tokens);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto stream = stub.Generate(&context, request);
  Served served;
  yoco::v1::GenerateResponse event;
  while (stream->Read(&event)) {
    if (event.has_token()) served.tokens.push_back(event.token().id());
  }
  served.status = stream->Finish();
  return served;
}

}  // namespace

int main(int argc, char** argv) {
  int streams = 0, tokens = 0;
  if (argc != 7 || !absl::SimpleAtoi(argv[5], &streams) || !absl::SimpleAtoi(argv[6], &tokens) ||
      streams < 1 || tokens < 1) {
    std::cerr << "usage: concurrent_streams ROUTER_HOST:PORT MODEL_DIR WEIGHTS KV_DTYPE STREAMS "
                 "TOKENS\n";
    return 2;
  }
  auto weights = yoco::ParseWeightFormat(argv[3]);
  auto kv_dtype = yoco::ParseKvDtype(argv[4]);
  if (!weights.ok() || !kv_dtype.ok()) {
    std::cerr << "bad weight format or K/V dtype\n";
    return 2;
  }
  auto model = yoco::Model::Load(argv[2], *weights, *kv_dtype);
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    return 2;
  }
  const int vocab = (*model)->config().vocab_size;
  std::mt19937 rng(20261204);
  std::vector<Request> requests(streams);
  for (int i = 0; i < streams; ++i) {
    Request& r = requests[i];
    r.prompt.push_back(0);
    const int n = 20 + static_cast<int>(rng() % 181);
    for (int t = 1; t < n; ++t) r.prompt.push_back(4 + static_cast<int32_t>(rng() % (vocab - 4)));
    if (i % 2 == 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 50;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 1000 + i;
    }
  }

  // All at once, so the decode worker's batches hold many of them.
  auto stub =
      yoco::v1::Yoco::NewStub(grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  std::vector<Served> served(streams);
  std::barrier start(streams);
  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      served[i] = Serve(*stub, requests[i], tokens);
    });
  }
  for (std::thread& t : threads) t.join();

  // Each alone, in this process: a batch of one.
  yoco::CpuBackend backend(*model);
  int differing = 0;
  for (int i = 0; i < streams; ++i) {
    yoco::GenerateOptions options;
    options.max_new_tokens = tokens;
    options.sampling = requests[i].sampling;
    auto alone = yoco::Generate(backend, requests[i].prompt, options);
    if (!alone.ok()) {
      std::cerr << "in-process generation " << i << ": " << alone.status() << "\n";
      return 2;
    }
    if (!served[i].status.ok() || served[i].tokens != *alone) {
      size_t first = 0;
      while (first < alone->size() && first < served[i].tokens.size() &&
             (*alone)[first] == served[i].tokens[first]) {
        ++first;
      }
      std::cout << "stream " << i << (i % 2 ? " (seeded)" : " (greedy)") << ": status "
                << served[i].status.error_code() << " " << served[i].status.error_message() << ", "
                << served[i].tokens.size() << " tokens, first difference at " << first << "\n";
      ++differing;
    }
  }
  std::cout << argv[3] << " weights, " << argv[4] << " K/V: " << streams - differing << " of "
            << streams << " concurrent streams equal the in-process engine's tokens\n";
  return differing == 0 ? 0 : 1;
}
