#include "services/router/decode_relay.h"

#include <limits>
#include <memory>

#include "absl/random/random.h"
#include "lib/rpc/trace_metadata.h"

namespace yoco {
namespace {

// How long an EndChoice may take: the worker answers at once, and a choice left running only
// costs its steps until the call ends.
constexpr std::chrono::seconds kEndChoiceTimeout{5};

// A call with choices gets a random id, for EndChoice to name it by.
v1::DecodeRequest WithCallId(v1::DecodeRequest request) {
  if (request.choices_size() > 0) {
    thread_local absl::BitGen bits;
    request.set_call_id(absl::Uniform<uint64_t>(bits, 1, std::numeric_limits<uint64_t>::max()));
  }
  return request;
}

}  // namespace

DecodeRelay::DecodeRelay(v1::DecodeRequest request,
                         std::function<void(const v1::DecodeEvent&)> on_event,
                         std::function<void(const grpc::Status&)> on_done)
    : HeldStreamReader(std::make_unique<grpc::ClientContext>(), std::move(on_event),
                       std::move(on_done)),
      request_(WithCallId(std::move(request))) {}

void DecodeRelay::Start(v1::DecodeWorker::StubInterface& stub,
                        std::chrono::system_clock::time_point deadline, const TraceContext& trace) {
  stub_ = &stub;
  context()->set_deadline(deadline);
  InjectTrace(trace, context());
  stub.async()->Decode(context(), &request_, this);
  StartReading();
}

void DecodeRelay::EndChoice(uint32_t choice) {
  if (request_.call_id() == 0 || stub_ == nullptr) return;
  // Its own call, which outlives this relay if it must: the answer changes nothing here.
  struct Call {
    grpc::ClientContext context;
    v1::EndChoiceRequest request;
    v1::EndChoiceResponse response;
  };
  auto call = std::make_shared<Call>();
  call->context.set_deadline(std::chrono::system_clock::now() + kEndChoiceTimeout);
  call->request.set_call_id(request_.call_id());
  call->request.set_choice(choice);
  stub_->async()->EndChoice(&call->context, &call->request, &call->response,
                            [call](grpc::Status) {});
}

}  // namespace yoco
