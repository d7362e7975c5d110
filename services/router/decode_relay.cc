// The hold is taken before the call starts and released once, by whichever comes first: the
// stream's end or the reader's Abandon.
#include "services/router/decode_relay.h"

#include "lib/rpc/trace_metadata.h"

namespace yoco {

DecodeRelay::DecodeRelay(v1::DecodeRequest request,
                         std::function<void(const v1::DecodeEvent&)> on_event,
                         std::function<void(const grpc::Status&)> on_done)
    : request_(std::move(request)), on_event_(std::move(on_event)), on_done_(std::move(on_done)) {}

void DecodeRelay::Start(v1::DecodeWorker::StubInterface& stub,
                        std::chrono::system_clock::time_point deadline, const TraceContext& trace) {
  context_.set_deadline(deadline);
  InjectTrace(trace, &context_);
  stub.async()->Decode(&context_, &request_, this);
  AddHold();
  StartRead(&event_);
  StartCall();
}

void DecodeRelay::Abandon() {
  context_.TryCancel();
  Release();
}

void DecodeRelay::OnReadDone(bool ok) {
  if (ok) {
    on_event_(event_);
  } else {
    Release();
  }
}

void DecodeRelay::Release() {
  if (held_) {
    held_ = false;
    RemoveHold();
  }
}

}  // namespace yoco
