#include "services/router/prefill_relay.h"

#include <utility>

namespace yoco {

PrefillRelay::PrefillRelay(std::unique_ptr<grpc::ClientContext> context, v1::PrefillRequest request,
                           std::function<void(const v1::PrefillResponse&)> on_message,
                           std::function<void(const grpc::Status&)> on_done)
    : HeldStreamReader(std::move(context), std::move(on_message), std::move(on_done)),
      request_(std::move(request)) {}

void PrefillRelay::Start(v1::PrefillWorker::StubInterface& stub) {
  stub.async()->PrefillStream(context(), &request_, this);
  StartReading();
}

}  // namespace yoco
