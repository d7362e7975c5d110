// The hold is taken before the call starts and released once, by whichever comes first: the
// stream's end or the reader's Abandon.
#include "services/router/prefill_relay.h"

namespace yoco {

PrefillRelay::PrefillRelay(std::unique_ptr<grpc::ClientContext> context, v1::PrefillRequest request,
                           std::function<void(const v1::PrefillResponse&)> on_message,
                           std::function<void(const grpc::Status&)> on_done)
    : context_(std::move(context)),
      request_(std::move(request)),
      on_message_(std::move(on_message)),
      on_done_(std::move(on_done)) {}

void PrefillRelay::Start(v1::PrefillWorker::StubInterface& stub) {
  stub.async()->PrefillStream(context_.get(), &request_, this);
  AddHold();
  StartRead(&message_);
  StartCall();
}

void PrefillRelay::Abandon() {
  context_->TryCancel();
  Release();
}

void PrefillRelay::OnReadDone(bool ok) {
  if (ok) {
    on_message_(message_);
  } else {
    Release();
  }
}

void PrefillRelay::Release() {
  if (held_) {
    held_ = false;
    RemoveHold();
  }
}

}  // namespace yoco
