// PrefillRelay: one PrefillStream call from the router to a prefill worker (a HeldStreamReader):
// the first token (first_token_only) while the bundle ships, then the whole answer. The router
// reads the answer only after the client took the first token, so the stream's steps stay one
// at a time.
#ifndef YOCO_SERVICES_ROUTER_PREFILL_RELAY_H_
#define YOCO_SERVICES_ROUTER_PREFILL_RELAY_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>

#include "services/router/held_stream_reader.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

class PrefillRelay final : public HeldStreamReader<v1::PrefillResponse> {
 public:
  // `context` carries the call's deadline, cancellation and trace metadata. `on_message` gets
  // each message and must call ReadNext or Abandon; `on_done` gets the call's end.
  PrefillRelay(std::unique_ptr<grpc::ClientContext> context, v1::PrefillRequest request,
               std::function<void(const v1::PrefillResponse&)> on_message,
               std::function<void(const grpc::Status&)> on_done);

  void Start(v1::PrefillWorker::StubInterface& stub);

 private:
  const v1::PrefillRequest request_;
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_PREFILL_RELAY_H_
