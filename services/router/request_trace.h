// RequestTrace: the spans of one Generate call at the router. The request's span (a SERVER span
// named as OpenTelemetry's generative-AI conventions name an inference call, "text_completion
// MODEL") continues the client's W3C trace or starts one; under it, per attempt, the pair choice
// (with any wait for workers or for room), the prefill call and the decode stream (CLIENT spans,
// whose contexts go to the workers in metadata so their spans hang under them). Without tracing
// every call is a no-op, and a client's trace context is still passed on to the workers.
#ifndef YOCO_SERVICES_ROUTER_REQUEST_TRACE_H_
#define YOCO_SERVICES_ROUTER_REQUEST_TRACE_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "lib/trace/span.h"
#include "lib/trace/tracer.h"
#include "services/router/request_checks.h"
#include "yoco/v1/worker.pb.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

class RequestTrace {
 public:
  // The request's span for a call to `model`, under what the client sent in `context`'s
  // metadata.
  RequestTrace(const grpc::CallbackServerContext& context, const std::string& model);

  // "" when the request is in no trace; the access log's trace_id otherwise.
  std::string trace_id() const;

  // The request as checked: its model and sampling, its id and tenant.
  void Describe(const CheckedGenerateRequest& call, const std::string& request_id,
                const std::string& tenant);

  // An attempt starts choosing a pair; then the pair it got (addresses; "local" prefill).
  void StartChoosing(int attempt);
  void NoteWait(absl::string_view what);  // "workers" or "room"
  void Chosen(const std::string& prefill, const std::string& decode);

  // The remote prefill call, carried in `call`; then its answer.
  void StartPrefill(const std::string& worker, grpc::ClientContext* call);
  void PrefillDone(const grpc::Status& status, const v1::PrefillResponse& response);

  // The decode stream; the context to carry in its call; then its end.
  const TraceContext& StartDecode(const std::string& worker);
  void DecodeDone(const grpc::Status& status, v1::FinishReason reason);

  void FirstToken();
  // The request's end: its status and what the client was told.
  void End(const grpc::Status& status, const v1::Finish& finish, int retries);

 private:
  const std::shared_ptr<const Tracer> tracer_;  // never null
  Span request_, choosing_, prefill_, decode_;
  std::string waiting_for_;  // the wait the choosing span noted last
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_REQUEST_TRACE_H_
