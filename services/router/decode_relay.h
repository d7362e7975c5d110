// DecodeRelay: one Decode call from the router to a decode worker, read one event at a time (a
// HeldStreamReader): the router reads the next event only after the client took the last token.
#ifndef YOCO_SERVICES_ROUTER_DECODE_RELAY_H_
#define YOCO_SERVICES_ROUTER_DECODE_RELAY_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>

#include "lib/trace/trace_context.h"
#include "services/router/held_stream_reader.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

class DecodeRelay final : public HeldStreamReader<v1::DecodeEvent> {
 public:
  // `on_event` gets each event and must call ReadNext or Abandon; `on_done` gets the call's end.
  DecodeRelay(v1::DecodeRequest request, std::function<void(const v1::DecodeEvent&)> on_event,
              std::function<void(const grpc::Status&)> on_done);

  // `trace`: the decode span the worker's spans go under (none when invalid).
  void Start(v1::DecodeWorker::StubInterface& stub, std::chrono::system_clock::time_point deadline,
             const TraceContext& trace = {});
  // Asks the worker to end one of the call's choices (a stop string ended it here), so that it
  // stops decoding it; its finish then comes with FINISH_REASON_CANCELLED. After Start.
  void EndChoice(uint32_t choice);

 private:
  const v1::DecodeRequest request_;                  // with a call_id when it has choices
  v1::DecodeWorker::StubInterface* stub_ = nullptr;  // Start's
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_DECODE_RELAY_H_
