// HeldStreamReader: the router's side of a server-streaming call to a worker, read one message
// at a time. The router reads the next message only after the client took what the last one
// carried, so the client's pace holds the stream back, not a thread. A hold keeps the call open
// between reads (without it the call could end, and its reader go, while a token is being
// written to the client); it goes once, by whichever comes first: a read that fails (the
// stream's end) or the reader stopping (Abandon). PrefillRelay and DecodeRelay are the two.
#ifndef YOCO_SERVICES_ROUTER_HELD_STREAM_READER_H_
#define YOCO_SERVICES_ROUTER_HELD_STREAM_READER_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>

#include <functional>
#include <memory>
#include <utility>

namespace yoco {

template <typename Message>
class HeldStreamReader : public grpc::ClientReadReactor<Message> {
 public:
  grpc::ClientContext* context() { return context_.get(); }
  // The reader's calls, one at a time, never while a read is outstanding.
  void ReadNext() { this->StartRead(&message_); }
  void Abandon() {
    context_->TryCancel();
    Release();
  }
  // From any thread: ends an outstanding read, and with it the reading.
  void Cancel() { context_->TryCancel(); }

  void OnReadDone(bool ok) override {
    if (ok) {
      on_message_(message_);
    } else {
      Release();
    }
  }
  void OnDone(const grpc::Status& status) override { on_done_(status); }

 protected:
  // `on_message` gets each message and must call ReadNext or Abandon; `on_done` gets the call's
  // end.
  HeldStreamReader(std::unique_ptr<grpc::ClientContext> context,
                   std::function<void(const Message&)> on_message,
                   std::function<void(const grpc::Status&)> on_done)
      : context_(std::move(context)),
        on_message_(std::move(on_message)),
        on_done_(std::move(on_done)) {}

  // Once the stub's async() call has bound this reactor: takes the hold, asks for the first
  // message and starts the call.
  void StartReading() {
    this->AddHold();
    this->StartRead(&message_);
    this->StartCall();
  }

 private:
  void Release() {
    if (held_) {
      held_ = false;
      this->RemoveHold();
    }
  }

  const std::unique_ptr<grpc::ClientContext> context_;
  const std::function<void(const Message&)> on_message_;
  const std::function<void(const grpc::Status&)> on_done_;
  Message message_;
  bool held_ = true;  // the reader's
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_HELD_STREAM_READER_H_
