// GenerateStream: one Generate call on gRPC's callback API, an object that owns the request's
// phases (choose a worker pair, prefill, ship, decode stream, retry on another pair with the
// tokens already sent) as a chain of asynchronous steps, so an open stream holds no thread.
// Exactly one step is in flight at a time (a worker call, a write to the client, or the timer
// of a wait for workers); each step's completion starts the next. Cancellation by the client
// cancels the step in flight, whose completion then ends the call.
#ifndef YOCO_SERVICES_ROUTER_GENERATE_STREAM_H_
#define YOCO_SERVICES_ROUTER_GENERATE_STREAM_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "services/router/request_checks.h"
#include "services/router/router_service.h"

namespace yoco {

class GenerateStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Starts the call; it deletes itself when gRPC is done with it and no worker call is left.
  GenerateStream(RouterService& router, grpc::CallbackServerContext* context,
                 const v1::GenerateRequest* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class DecodeRelay;  // the Decode call to a decode worker

  ~GenerateStream() override;

  // The attempt loop: each attempt chooses a pair (waiting for one when none is healthy),
  // then prefills remotely or on the decode worker.
  void Attempt();
  void ChooseWorkers();
  void StartRemotePrefill();
  void OnPrefillDone(const grpc::Status& status);
  void StartDecode(v1::DecodeRequest request, bool local);
  void OnDecodeEvent(const v1::DecodeEvent& event);  // then the relay reads the next or stops
  void OnDecodeDone(const grpc::Status& status);
  void NextAttempt();
  // Every pair left refused for load: wait at the router (LoadWaitQueue) for room, within the
  // request's deadline and RouterOptions::max_load_wait; then OnRoom.
  void WaitForRoom();
  void OnRoom(bool turn);  // the queue's answer: try again, or shed

  // Sends a token to the client, then runs `then` (not when the client is gone).
  void Emit(int32_t id, std::function<void()> then);
  std::optional<v1::FinishReason> StopsAt(int32_t id) const;
  // The request succeeded (reason set) or failed with last_error_.
  void Complete();
  void FinishWith(const grpc::Status& status);

  // Worker calls (and the wait timer) in flight: the object lives until they are done.
  void BeginOp();
  void EndOp();

  RouterService& router_;
  grpc::CallbackServerContext* const context_;
  const v1::GenerateRequest* const request_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  RouterService::CallScope scope_;
  GenerateCall call_;

  // What was sent to the client.
  std::vector<int32_t> generated_;
  std::string output_bytes_;
  size_t text_pos_ = 0;
  std::string sent_text_;
  bool stop_string_hit_ = false;
  std::chrono::steady_clock::time_point last_token_time_ = start_;
  v1::Finish finish_;
  v1::GenerateResponse out_;  // the write in flight
  std::function<void()> after_write_;

  // The attempts.
  int attempt_ = 0;
  std::vector<size_t> bad_prefill_, bad_decode_;    // failed: not tried again by this request
  std::vector<size_t> busy_prefill_, busy_decode_;  // refused for load: not until room comes
  std::chrono::system_clock::time_point load_wait_until_;
  v1::FinishReason reason_ = v1::FINISH_REASON_UNSPECIFIED;
  grpc::Status last_error_{grpc::StatusCode::UNAVAILABLE, "no worker answered"};
  bool cache_reported_ = false;
  std::optional<size_t> last_prefill_;
  bool force_remote_ = false;
  std::vector<int32_t> input_;  // this attempt's prompt plus the tokens already sent
  std::vector<BlockKey> keys_;
  std::chrono::system_clock::time_point wait_until_;
  std::optional<WorkerChoice> decode_choice_, prefill_choice_;
  bool local_ = false;
  std::optional<WorkerRegistry::InFlight> decode_in_flight_, prefill_in_flight_;
  v1::PrefillRequest prefill_request_;
  v1::PrefillResponse prefill_response_;
  v1::FinishReason decode_reason_ = v1::FINISH_REASON_UNSPECIFIED;
  bool decode_first_token_ = true;
  uint64_t stall_id_ = 0;             // this attempt's decode stream in the StallWatch
  std::atomic<bool> stalled_{false};  // the StallWatch cut it: the worker failed
  std::chrono::steady_clock::time_point decode_start_;

  // Read by OnCancel on another thread. Contexts and relays are kept until the end, so a
  // cancellation never races their destruction.
  std::mutex mu_;
  std::vector<std::unique_ptr<grpc::ClientContext>> prefill_contexts_;  // guarded by mu_
  std::vector<std::unique_ptr<DecodeRelay>> relays_;                    // guarded by mu_
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_;                    // guarded by mu_
  bool cancelled_ = false;                                              // guarded by mu_
  uint64_t waiting_place_ = 0;  // guarded by mu_: while in the load queue
  bool room_answered_ = false;  // guarded by mu_: OnRoom ran for the last wait
  uint64_t first_place_ = 0;    // guarded by mu_: kept across waits, so the turn is kept
  int ops_ = 0;                 // guarded by mu_
  bool done_ = false;           // guarded by mu_
  bool finished_ = false;       // Finish called (only the chain calls it)
};

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_GENERATE_STREAM_H_
