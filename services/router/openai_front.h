// OpenAiFront: the router's OpenAI-compatible HTTP API (--http-listen). Every request becomes a
// call of the router's own gRPC service over an in-process channel, so HTTP and gRPC share one
// request path: the same checks, tenants (the Authorization header travels as metadata),
// routing, retries, prefix cache and metrics. A client that disconnects cancels its call, which
// frees its sequence on every worker as a gRPC cancel does.
#ifndef YOCO_SERVICES_ROUTER_OPENAI_FRONT_H_
#define YOCO_SERVICES_ROUTER_OPENAI_FRONT_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/http/http_server.h"
#include "lib/openai/chat_template.h"
#include "lib/openai/openai_request.h"
#include "lib/openai/openai_response.h"
#include "lib/text/tokenizer.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {

struct OpenAiFrontOptions {
  std::string model_name;  // what /v1/models lists and requests may name
  OpenAiDefaults defaults;
  // A call's deadline when the request has no X-Request-Timeout header (seconds).
  absl::Duration request_timeout = absl::Minutes(10);
};

class OpenAiFront {
 public:
  // `channel`: the router's own service (grpc::Server::InProcessChannel). `ready`: whether the
  // router can admit a request now (GET /ready). `responses`: HTTP responses by status; may be
  // null. `tokenizer` must outlive the front.
  OpenAiFront(std::shared_ptr<grpc::Channel> channel, const Tokenizer& tokenizer,
              std::optional<ChatTemplate> chat_template, std::function<bool()> ready,
              OpenAiFrontOptions options, prometheus::Family<prometheus::Counter>* responses);

  // The HttpServer's handler.
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange);

  // Refuses new requests (503), cancels the calls in flight and waits up to `timeout` for them
  // to end. False if some did not (their exchanges must then outlive the process).
  bool Shutdown(absl::Duration timeout);

  // For the calls (implementation details, public so that the .cc's call classes reach them).
  // The deadline and credentials of the HTTP request on its call.
  absl::Status PrepareContext(const HttpRequest& request, grpc::ClientContext& context) const;
  void Respond(HttpExchange& exchange, int status, const std::string& body);
  void Fail(HttpExchange& exchange, const absl::Status& status);
  bool Begin(grpc::ClientContext* context);  // false once shutting down
  void End(grpc::ClientContext* context);
  void CountResponse(int status);

 private:
  void Generate(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange, bool chat);
  // A completion with echo: the prompt scored (Score), answered with its text and logprobs.
  void Echo(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange,
            const OpenAiGenerate& parsed, const CompletionHeader& header);
  void Models(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  void Tokenize(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  void Detokenize(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  void Precache(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  void ListCache(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  void EvictCache(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange,
                  const std::string& handle);

  const std::unique_ptr<v1::Yoco::Stub> stub_;
  const Tokenizer& tokenizer_;
  const std::optional<ChatTemplate> chat_template_;
  const std::function<bool()> ready_;
  const OpenAiFrontOptions options_;
  prometheus::Family<prometheus::Counter>* const responses_;
  const int64_t started_unix_;

  absl::Mutex mu_;
  absl::CondVar idle_;
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);  // in flight
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_OPENAI_FRONT_H_
