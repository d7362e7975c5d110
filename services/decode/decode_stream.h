// DecodeStream: one Decode call on gRPC's callback API. The sequence is admitted without
// blocking the RPC thread (its bundle may still be on its way, or it is prefilled here on the
// worker's own thread); its events come from the batching thread into a queue that is written
// to the caller one message at a time. An open stream holds no thread, and a cancelled call
// cancels its sequence at once (no polling). Only its caller can cancel a sequence (the call, or
// one choice through EndChoice), so a stream ends OK only with the reasons its caller asked for
// (length, stop, EOS, and a choice it ended).
#ifndef YOCO_SERVICES_DECODE_DECODE_STREAM_H_
#define YOCO_SERVICES_DECODE_DECODE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "lib/trace/span.h"
#include "lib/workers/decode_worker.h"
#include "services/decode/decode_calls.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco {

class DecodeStream final : public grpc::ServerWriteReactor<v1::DecodeEvent> {
 public:
  // Starts the call; it deletes itself when gRPC is done with it and the worker will not call
  // back any more.
  DecodeStream(DecodeWorker& worker, DecodeCalls& calls, grpc::CallbackServerContext* context,
               const v1::DecodeRequest* request);

  // Ends one of the call's choices (DecodeCalls::EndChoice): its sequence is cancelled and its
  // finish streams with FINISH_REASON_CANCELLED. False when the call has no such choice going.
  bool EndChoice(uint32_t choice);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  ~DecodeStream() override;
  void OnEvent(const DecodeEvent& event);               // batching (or prefill) thread
  void OnAdmitted(const absl::StatusOr<uint64_t>& id);  // any thread
  // Writes the next queued event unless a write is in flight.
  void Pump();
  // Finishes the call once; mu_ not held.
  void FinishOnce(const grpc::Status& status);
  // The worker's side: its admission answer came, and its events are over (a finished event,
  // or none will come). Both done and OnDone called: deletes this.
  void EngineDone(bool admission, bool events);

  DecodeWorker& worker_;
  DecodeCalls& calls_;
  uint64_t call_id_ = 0;                // named in calls_ (0: not)
  std::atomic<bool> cancelled_{false};  // polled by a local prefill

  absl::Mutex mu_;
  std::deque<DecodeEvent> events_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool final_write_ ABSL_GUARDED_BY(mu_) = false;  // the finish message is in flight
  bool finished_ ABSL_GUARDED_BY(mu_) = false;     // Finish called
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;     // the batcher's id, once admitted
  uint64_t ticket_ ABSL_GUARDED_BY(mu_) = 0;       // waiting for the bundle
  bool admission_done_ ABSL_GUARDED_BY(mu_) = false;
  bool events_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // OnDone called
  // The call's span (under the router's decode span) and its admission's (the wait for the
  // bundle, or the local prefill, until the batcher takes the sequence).
  Span span_ ABSL_GUARDED_BY(mu_);
  Span admission_ ABSL_GUARDED_BY(mu_);
  bool first_token_ ABSL_GUARDED_BY(mu_) = false;
  // Choices (DecodeRequest.choices; 1 without): each ends with one finished event, and the
  // call with the last one's finish message.
  int choices_left_ ABSL_GUARDED_BY(mu_) = 1;       // finish messages still to write
  int unfinished_events_ ABSL_GUARDED_BY(mu_) = 1;  // finished events still to come
  int output_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<uint32_t> going_ ABSL_GUARDED_BY(mu_);  // choices with no finished event
  absl::flat_hash_set<uint32_t> ended_ ABSL_GUARDED_BY(mu_);  // by EndChoice
  uint32_t index_ = 0;                                        // the next token's index (Pump's)
  v1::DecodeEvent out_;                                       // the write in flight
};

}  // namespace yoco

#endif  // YOCO_SERVICES_DECODE_DECODE_STREAM_H_
