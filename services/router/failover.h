// The router's retry rules as one pure function: given how an attempt's worker call ended, what
// the request does next and whom it blames. GenerateStream applies the decision; the table of
// rules is unit-tested row by row (tests/router/failover_test.cc).
#ifndef YOCO_SERVICES_ROUTER_FAILOVER_H_
#define YOCO_SERVICES_ROUTER_FAILOVER_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace yoco {

enum class WorkerRole { kPrefill, kDecode };

// How an attempt's Prefill call (that failed) or Decode stream (that ended) ended.
struct AttemptEnd {
  WorkerRole call = WorkerRole::kPrefill;
  grpc::StatusCode code = grpc::StatusCode::OK;
  bool client_gone = false;    // FailureIsTheClients
  bool decode_blamed = false;  // prefill: its failed-peer trailer names the decode worker
  bool finished = false;       // decode: the worker sent a finish reason other than CANCELLED
  bool stalled = false;        // decode: the StallWatch cut the stream
  bool local = false;          // decode: the decode worker prefilled this attempt itself
};

struct Failover {
  enum class Next {
    kComplete,       // the request succeeded: the finish goes to the client
    kEndClientGone,  // the client's doing: CANCELLED or DEADLINE_EXCEEDED, nobody blamed
    kFail,           // the worker's status goes to the client as it is
    kRetry,          // a new attempt on another pair (counts against RouterOptions::attempts)
    kReplan,         // another pair within this attempt: a refusal, not a failure
  };
  Next next = Next::kFail;
  // Marked failed for everyone (registry and metrics) and never tried again by this request.
  std::optional<WorkerRole> mark_failed;
  // The decode worker can never hold this sequence: skipped by this request, healthy for others.
  bool skip_decode = false;
  // Refused for load: skipped by this request until the load queue says there is room.
  bool busy_prefill = false;
  bool busy_decode = false;
  // Later attempts prefill on a prefill worker (the decode worker would not prefill).
  bool force_remote = false;

  bool operator==(const Failover&) const = default;
};

// What follows `end`. A Prefill call that succeeded continues to its Decode stream and is not
// asked about.
Failover DecideFailover(const AttemptEnd& end);

// The workers one request avoids, as its attempts fail or are refused.
struct AvoidedWorkers {
  // Failed this request: not retried on at once; once the request waits for workers, the
  // probes alone decide (ForgetFailed), so a restarted worker may continue what it lost.
  std::vector<size_t> failed_prefill, failed_decode;
  std::vector<size_t> unfit_decode;               // a state budget too small: never again
  std::vector<size_t> busy_prefill, busy_decode;  // until the load queue says there is room
  bool force_remote = false;                      // no more local prefills

  // Records `f` for the pair that ended (`prefill`: none for a local prefill).
  void Note(const Failover& f, std::optional<size_t> prefill, size_t decode);
  std::vector<size_t> SkipPrefill() const;
  std::vector<size_t> SkipDecode() const;
  bool any_busy() const { return !busy_prefill.empty() || !busy_decode.empty(); }
  void ForgetFailed() {
    failed_prefill.clear();
    failed_decode.clear();
  }
};

// The error a request ends with if no later attempt succeeds, after an attempt that ended with
// `status` and was retried: a stall or a stream that ended without a finish say so (their status
// is OK or the router's own CANCELLED).
grpc::Status AttemptError(const AttemptEnd& end, const grpc::Status& status);

// Whether the client cancelled or its deadline passed.
bool ClientGone(const grpc::ServerContextBase& context);
// Whether a worker call that ended with `code` is the client's doing, and so must not mark the
// worker failed: the client is gone, or the call was cancelled or timed out with the deadline at
// most kDeadlineSlack away. The client's own timer fires first (the deadline the router holds is
// later by the request's trip), and the cancel it sends ends the worker's call, which carries the
// client's deadline and cancellation, before the router's context may say it was cancelled.
inline constexpr std::chrono::milliseconds kDeadlineSlack{100};
bool FailureIsTheClients(grpc::StatusCode code, bool cancelled,
                         std::chrono::system_clock::time_point now,
                         std::chrono::system_clock::time_point deadline);
bool FailureIsTheClients(grpc::StatusCode code, const grpc::ServerContextBase& context);
// What the client is told then: DEADLINE_EXCEEDED (with the worker's message) when the deadline
// is at most kDeadlineSlack away, else CANCELLED.
grpc::Status ClientGoneStatus(const grpc::ServerContextBase& context, const grpc::Status& worker);
// CANCELLED, as the client is told when it cancelled.
grpc::Status ClientCancelledStatus();

}  // namespace yoco

#endif  // YOCO_SERVICES_ROUTER_FAILOVER_H_
