// GenerateStream: one Generate call on gRPC's callback API, an object that owns the request's
// phases (choose a worker pair, prefill, ship, decode stream, retry on another pair with the
// tokens already sent) as a chain of asynchronous steps, so an open stream holds no thread.
// Exactly one step is in flight at a time (a worker call, a write to the client, or the timer
// of a wait for workers); each step's completion starts the next. Cancellation by the client
// cancels the step in flight, whose completion then ends the call. What follows a failed step
// is DecideFailover's; the router is reached only through WorkerPool. A pair (and any wait for
// one) is PairSearch's, what the request counts and reports is RequestLedger's, and what each
// choice has had is ChoiceSet's.
#ifndef YOCO_SERVICES_ROUTER_GENERATE_STREAM_H_
#define YOCO_SERVICES_ROUTER_GENERATE_STREAM_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "services/router/choice_set.h"
#include "services/router/decode_relay.h"
#include "services/router/failover.h"
#include "services/router/generate_admission.h"
#include "services/router/in_flight_ops.h"
#include "services/router/pair_search.h"
#include "services/router/prefill_relay.h"
#include "services/router/request_checks.h"
#include "services/router/request_ledger.h"
#include "services/router/request_trace.h"
#include "services/router/sent_tokens.h"
#include "services/router/worker_pool.h"
#include "services/router/worker_requests.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {

class GenerateStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Starts the call; it deletes itself when gRPC is done with it and no worker call is left.
  GenerateStream(WorkerPool& pool, grpc::CallbackServerContext* context,
                 const v1::GenerateRequest* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  ~GenerateStream() override;

  // Where the chain is. Each step's completion checks that it is where it should be.
  enum class Phase {
    kChoosing,    // PairSearch: a pair for the attempt, waiting for workers or room if need be
    kPrefilling,  // the Prefill call (and, when it streams, its first token to the client)
    kDecoding,    // the Decode stream (and the prefill's first token to the client)
    kFinished,    // Finish called or the finish message being written
  };

  // One try on one pair: reset by every attempt (and by a re-plan after a refusal for load).
  struct Attempt {
    std::vector<int32_t> input;  // the prompt plus the tokens already sent
    std::vector<BlockKey> keys;
    WorkerPair pair;
    std::unique_ptr<WorkerRegistry::InFlight> decode_load, prefill_load;
    v1::PrefillRequest prefill_request;
    v1::PrefillResponse prefill_response;
    // A PrefillStream call (the prefill worker answers one): its first token goes to the client
    // while the bundle ships (`first_sent_early`), its whole answer follows (`prefill_answered`).
    PrefillRelay* prefill_relay = nullptr;
    bool first_sent_early = false;
    bool prefill_answered = false;
    std::vector<v1::GeneratedToken> first_tokens;  // the prefill's, to the client
    v1::FinishReason decode_reason = v1::FINISH_REASON_UNSPECIFIED;
    bool prefill_ends_at_first_token = false;  // a local prefill: its time ends there
    uint64_t stall_id = 0;                     // the decode stream in the StallWatch
    std::chrono::steady_clock::time_point decode_start;
  };

  // A new attempt (counted against RouterOptions::attempts when `retry`).
  void StartAttempt(bool retry);
  void OnPairFound(const WorkerPair& pair);
  void StartRemotePrefill();
  void StartPrefillStream();
  void OnPrefillMessage(const v1::PrefillResponse& message);  // then reads on or stops
  void OnPrefillStreamDone(const grpc::Status& status);
  void OnPrefillDone(const grpc::Status& status, bool decode_blamed);
  void ContinueAfterFirstToken();
  void StartDecode(v1::DecodeRequest request);
  void OnDecodeEvent(const v1::DecodeEvent& event);  // then the relay reads the next or stops
  void OnDecodeDone(const grpc::Status& status);
  // Applies DecideFailover's answer for how this attempt's call ended with `status`.
  void Fail(const AttemptEnd& end, const grpc::Status& status);

  // What this attempt asks of its workers.
  AttemptRequest Asked() const;
  // Sends a token a worker produced for `choice` to the client, then runs `then` (not when the
  // client is gone).
  void Emit(const v1::GeneratedToken& produced, std::function<void()> then, uint32_t choice = 0);
  // The request succeeded with `reason`.
  void Complete(v1::FinishReason reason);
  // The request failed with `status` (or succeeded on the client's side: never called twice).
  void FinishWith(const grpc::Status& status);
  // Whether the chain is in `expected`; if not (a bug), the call ends with INTERNAL.
  bool InPhase(Phase expected);

  // The object lives until gRPC is done with the call and every op has ended (InFlightOps).
  void EndOp();

  WorkerPool& pool_;
  RouterMetrics& metrics_;
  grpc::CallbackServerContext* const context_;
  const v1::GenerateRequest* const request_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  RequestTrace trace_;
  AdmittedGenerate admitted_;
  RequestLedger ledger_;
  Phase phase_ = Phase::kChoosing;

  ChoiceSet choices_;  // what was sent to the client
  bool multi() const { return choices_.multi(); }
  // Sends the prefill's first tokens from the `i`th on (ChoiceSet::FirstTokensToSend), then
  // completes the request, reads the streaming prefill's answer, or goes on to decode.
  void EmitFirstTokens(size_t i);
  // The finish of the request's choices (usage.generated_tokens counting them all).
  v1::Finish Finished(v1::FinishReason reason);
  v1::GenerateResponse out_;  // the write in flight
  std::function<void()> after_write_;

  // Across attempts.
  int attempts_ = 0;
  Attempt attempt_;
  grpc::Status last_error_{grpc::StatusCode::UNAVAILABLE, "no healthy prefill or decode worker"};
  std::optional<size_t> last_prefill_;  // the last that answered: it snapshots the conversation
  std::atomic<bool> stalled_{false};    // the StallWatch cut this attempt's stream
  // The model version asked for, or that of the tokens streamed (0 before the first): every
  // attempt stays on it.
  uint64_t version_ = 0;

  InFlightOps ops_;
  PairSearch search_;  // after ops_, which it uses
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_GENERATE_STREAM_H_
