// PrefillRelay: one PrefillStream call from the router to a prefill worker, read one message at
// a time: the first token (first_token_only) while the bundle ships, then the whole answer. The
// router reads the answer only after the client took the first token, so the stream's steps
// stay one at a time. A hold keeps the call open between reads; it goes when a read fails (the
// stream's end) or when the reader stops reading (Abandon).
#ifndef YOCO_SERVICES_ROUTER_PREFILL_RELAY_H_
#define YOCO_SERVICES_ROUTER_PREFILL_RELAY_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>

#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

class PrefillRelay final : public grpc::ClientReadReactor<v1::PrefillResponse> {
 public:
  // `context` carries the call's deadline, cancellation and trace metadata. `on_message` gets
  // each message and must call ReadNext or Abandon; `on_done` gets the call's end.
  PrefillRelay(std::unique_ptr<grpc::ClientContext> context, v1::PrefillRequest request,
               std::function<void(const v1::PrefillResponse&)> on_message,
               std::function<void(const grpc::Status&)> on_done);

  grpc::ClientContext* context() { return context_.get(); }
  void Start(v1::PrefillWorker::StubInterface& stub);
  // The reader's calls, one at a time, never while a read is outstanding.
  void ReadNext() { StartRead(&message_); }
  void Abandon();
  // From any thread: ends an outstanding read, and with it the reading.
  void Cancel() { context_->TryCancel(); }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override { on_done_(status); }

 private:
  void Release();

  const std::unique_ptr<grpc::ClientContext> context_;
  const v1::PrefillRequest request_;
  const std::function<void(const v1::PrefillResponse&)> on_message_;
  const std::function<void(const grpc::Status&)> on_done_;
  v1::PrefillResponse message_;
  bool held_ = true;  // the reader's
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_PREFILL_RELAY_H_
