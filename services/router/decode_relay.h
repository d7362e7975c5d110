// DecodeRelay: one Decode call from the router to a decode worker, read one event at a time.
// The router reads the next event only after the client took the last token, so the client's
// pace holds the stream back, not a thread. A hold keeps the call open between reads (without
// it the call could end, and its reader go, while a token is being written to the client); it
// goes when a read fails (the stream's end) or when the reader stops reading (Abandon).
#ifndef YOCO_SERVICES_ROUTER_DECODE_RELAY_H_
#define YOCO_SERVICES_ROUTER_DECODE_RELAY_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>

#include "lib/trace/trace_context.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

class DecodeRelay final : public grpc::ClientReadReactor<v1::DecodeEvent> {
 public:
  // `on_event` gets each event and must call ReadNext or Abandon; `on_done` gets the call's end.
  DecodeRelay(v1::DecodeRequest request, std::function<void(const v1::DecodeEvent&)> on_event,
              std::function<void(const grpc::Status&)> on_done);

  // `trace`: the decode span the worker's spans go under (none when invalid).
  void Start(v1::DecodeWorker::StubInterface& stub, std::chrono::system_clock::time_point deadline,
             const TraceContext& trace = {});
  // The reader's calls, one at a time, never while a read is outstanding.
  void ReadNext() { StartRead(&event_); }
  void Abandon();
  // From any thread: ends an outstanding read, and with it the reading.
  void Cancel() { context_.TryCancel(); }
  // Asks the worker to end one of the call's choices (a stop string ended it here), so that it
  // stops decoding it; its finish then comes with FINISH_REASON_CANCELLED. After Start.
  void EndChoice(uint32_t choice);

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override { on_done_(status); }

 private:
  void Release();

  const v1::DecodeRequest request_;                  // with a call_id when it has choices
  v1::DecodeWorker::StubInterface* stub_ = nullptr;  // Start's
  const std::function<void(const v1::DecodeEvent&)> on_event_;
  const std::function<void(const grpc::Status&)> on_done_;
  grpc::ClientContext context_;
  v1::DecodeEvent event_;
  bool held_ = true;  // the reader's
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_DECODE_RELAY_H_
