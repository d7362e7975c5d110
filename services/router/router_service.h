// RouterService: the public Yoco API. Tokenises, picks the least-loaded prefill and decode
// workers, drives both phases and streams tokens. If a worker fails mid-request the request
// continues on another pair: the prompt plus the tokens already sent are prefilled again, and
// since sampling is a function of (seed, position) the stream goes on exactly as it would have.
#ifndef YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_
#define YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/engine/model_config.h"
#include "lib/text/tokenizer.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "yoco/v1/worker.grpc.pb.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {

struct RouterOptions {
  std::vector<std::string> prefill_workers;  // HOST:PORT
  std::vector<std::string> decode_workers;
  int attempts = 3;  // worker pairs tried per request
  uint32_t default_max_new_tokens = 16;
  uint32_t transfer_timeout_ms = 30000;
};

// The router's Prometheus metrics.
struct RouterMetrics {
  explicit RouterMetrics(prometheus::Registry& registry);
  prometheus::Counter& Outcome(grpc::StatusCode code);

  prometheus::Family<prometheus::Counter>& requests;  // by outcome
  prometheus::Histogram& time_to_first_token;         // seconds
  prometheus::Histogram& inter_token;                 // seconds between streamed tokens
  prometheus::Counter& generated_tokens;
  prometheus::Counter& retries;  // worker pairs retried after a failure
};

class RouterService final : public v1::Yoco::Service {
 public:
  // `metrics` may be null.
  RouterService(ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                std::string tokenizer_name, RouterOptions options, RouterMetrics* metrics);

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override;
  grpc::Status Detokenize(grpc::ServerContext* context, const v1::DetokenizeRequest* request,
                          v1::DetokenizeResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;

 private:
  struct Worker {
    std::string address;
    std::unique_ptr<v1::PrefillWorker::Stub> prefill;
    std::unique_ptr<v1::DecodeWorker::Stub> decode;
  };
  // The reachable worker with the fewest active + queued requests, skipping `exclude`; null
  // when none answers. `info` receives its WorkerInfo.
  Worker* PickWorker(std::vector<Worker>& workers, const std::vector<Worker*>& exclude,
                     bool prefill, v1::WorkerInfo* info);
  grpc::Status DoGenerate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                          grpc::ServerWriter<v1::GenerateResponse>* writer);

  const ModelConfig config_;
  const std::unique_ptr<Tokenizer> tokenizer_;
  const std::string tokenizer_name_;
  const RouterOptions options_;
  RouterMetrics* const metrics_;
  std::vector<Worker> prefill_workers_;
  std::vector<Worker> decode_workers_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_ROUTER_SERVICE_H_
