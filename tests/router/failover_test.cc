// The retry rules, row by row: each row is one way an attempt's worker call can end and what
// the request must do next. The expected decisions come from the rules' statement in
// services/router/failover.h and docs/serving.md, not from running the function.
#include "services/router/failover.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace yoco {
namespace {

using Code = grpc::StatusCode;
using Next = Failover::Next;

struct Row {
  std::string name;
  AttemptEnd end;
  Failover want;
};

AttemptEnd Prefill(Code code) {
  AttemptEnd e;
  e.call = WorkerRole::kPrefill;
  e.code = code;
  return e;
}

AttemptEnd Decode(Code code) {
  AttemptEnd e;
  e.call = WorkerRole::kDecode;
  e.code = code;
  return e;
}

template <typename F>
AttemptEnd With(AttemptEnd e, F f) {
  f(e);
  return e;
}

Failover Want(Next next) {
  Failover f;
  f.next = next;
  return f;
}

Failover Mark(Next next, WorkerRole role) {
  Failover f = Want(next);
  f.mark_failed = role;
  return f;
}

std::vector<Row> Rows() {
  std::vector<Row> rows;
  auto gone = [](AttemptEnd& e) { e.client_gone = true; };
  auto blamed = [](AttemptEnd& e) { e.decode_blamed = true; };
  auto finished = [](AttemptEnd& e) { e.finished = true; };
  auto stalled = [](AttemptEnd& e) { e.stalled = true; };
  auto local = [](AttemptEnd& e) { e.local = true; };

  // Prefill calls that failed.
  rows.push_back({"prefill_client_gone", With(Prefill(Code::DEADLINE_EXCEEDED), gone),
                  Want(Next::kEndClientGone)});
  rows.push_back({"prefill_client_gone_beats_blame",
                  With(With(Prefill(Code::UNAVAILABLE), gone), blamed),
                  Want(Next::kEndClientGone)});
  rows.push_back({"prefill_blames_decode", With(Prefill(Code::UNAVAILABLE), blamed),
                  Mark(Next::kRetry, WorkerRole::kDecode)});
  Failover busy_both = Want(Next::kReplan);
  busy_both.busy_prefill = busy_both.busy_decode = true;
  rows.push_back({"prefill_refused_for_load", Prefill(Code::RESOURCE_EXHAUSTED), busy_both});
  // CANCELLED with the client still there: the worker's server cancelled it (shutting down).
  for (Code code : {Code::UNAVAILABLE, Code::DEADLINE_EXCEEDED, Code::ABORTED, Code::INTERNAL,
                    Code::UNKNOWN, Code::CANCELLED}) {
    rows.push_back({"prefill_failed_" + std::to_string(code), Prefill(code),
                    Mark(Next::kRetry, WorkerRole::kPrefill)});
  }
  for (Code code : {Code::INVALID_ARGUMENT, Code::FAILED_PRECONDITION, Code::PERMISSION_DENIED,
                    Code::UNAUTHENTICATED, Code::NOT_FOUND}) {
    rows.push_back({"prefill_refused_" + std::to_string(code), Prefill(code), Want(Next::kFail)});
  }

  // Decode streams that ended.
  rows.push_back({"decode_finished", With(Decode(Code::OK), finished), Want(Next::kComplete)});
  rows.push_back({"decode_finished_then_client_gone",
                  With(With(Decode(Code::CANCELLED), finished), gone), Want(Next::kComplete)});
  rows.push_back(
      {"decode_client_gone", With(Decode(Code::CANCELLED), gone), Want(Next::kEndClientGone)});
  rows.push_back({"decode_client_gone_beats_stall",
                  With(With(Decode(Code::CANCELLED), gone), stalled), Want(Next::kEndClientGone)});
  rows.push_back({"decode_client_gone_without_status", With(Decode(Code::OK), gone),
                  Want(Next::kEndClientGone)});
  rows.push_back({"decode_stalled", With(Decode(Code::CANCELLED), stalled),
                  Mark(Next::kRetry, WorkerRole::kDecode)});
  rows.push_back({"decode_stalled_beats_local_refusal",
                  With(With(Decode(Code::RESOURCE_EXHAUSTED), stalled), local),
                  Mark(Next::kRetry, WorkerRole::kDecode)});
  Failover remote = Want(Next::kRetry);
  remote.force_remote = true;
  rows.push_back(
      {"local_prefill_not_offered", With(Decode(Code::FAILED_PRECONDITION), local), remote});
  rows.push_back(
      {"local_prefill_queue_full", With(Decode(Code::RESOURCE_EXHAUSTED), local), remote});
  Failover skip = Want(Next::kReplan);
  skip.skip_decode = true;
  rows.push_back({"decode_can_never_hold_it", Decode(Code::FAILED_PRECONDITION), skip});
  Failover busy_decode = Want(Next::kReplan);
  busy_decode.busy_decode = true;
  rows.push_back({"decode_refused_for_load", Decode(Code::RESOURCE_EXHAUSTED), busy_decode});
  for (Code code :
       {Code::INVALID_ARGUMENT, Code::NOT_FOUND, Code::PERMISSION_DENIED, Code::UNAUTHENTICATED}) {
    rows.push_back({"decode_refused_" + std::to_string(code), Decode(code), Want(Next::kFail)});
  }
  for (Code code : {Code::UNAVAILABLE, Code::DEADLINE_EXCEEDED, Code::ABORTED, Code::INTERNAL,
                    Code::UNKNOWN, Code::CANCELLED}) {
    rows.push_back({"decode_failed_" + std::to_string(code), Decode(code),
                    Mark(Next::kRetry, WorkerRole::kDecode)});
    rows.push_back({"local_decode_failed_" + std::to_string(code), With(Decode(code), local),
                    Mark(Next::kRetry, WorkerRole::kDecode)});
  }
  rows.push_back({"decode_ended_early", Decode(Code::OK), Mark(Next::kRetry, WorkerRole::kDecode)});
  return rows;
}

std::string Describe(const Failover& f) {
  std::string s = "next=" + std::to_string(static_cast<int>(f.next));
  if (f.mark_failed) s += f.mark_failed == WorkerRole::kPrefill ? " mark=prefill" : " mark=decode";
  if (f.skip_decode) s += " skip_decode";
  if (f.busy_prefill) s += " busy_prefill";
  if (f.busy_decode) s += " busy_decode";
  if (f.force_remote) s += " force_remote";
  return s;
}

TEST(FailoverTest, EveryRowOfTheRules) {
  for (const Row& row : Rows()) {
    const Failover got = DecideFailover(row.end);
    EXPECT_EQ(got, row.want) << row.name << ": got " << Describe(got) << ", want "
                             << Describe(row.want);
  }
}

// Whatever else is true, a client that went away never gets a worker marked failed unless the
// worker had already finished the request.
TEST(FailoverTest, TheClientGoingAwayNeverBlamesAWorker) {
  for (WorkerRole call : {WorkerRole::kPrefill, WorkerRole::kDecode}) {
    for (int code = 0; code <= 16; ++code) {
      for (int flags = 0; flags < 8; ++flags) {
        AttemptEnd end;
        end.call = call;
        end.code = static_cast<Code>(code);
        end.client_gone = true;
        end.decode_blamed = flags & 1;
        end.stalled = flags & 2;
        end.local = flags & 4;
        if (call == WorkerRole::kPrefill && end.code == Code::OK) continue;
        const Failover f = DecideFailover(end);
        EXPECT_EQ(f.next, Next::kEndClientGone) << "code " << code << " flags " << flags;
        EXPECT_FALSE(f.mark_failed.has_value());
      }
    }
  }
}

// A refusal for load is never a failure: nobody is marked, and it is not an attempt.
TEST(FailoverTest, LoadIsNeverFailure) {
  for (WorkerRole call : {WorkerRole::kPrefill, WorkerRole::kDecode}) {
    AttemptEnd end;
    end.call = call;
    end.code = Code::RESOURCE_EXHAUSTED;
    const Failover f = DecideFailover(end);
    EXPECT_EQ(f.next, Next::kReplan);
    EXPECT_FALSE(f.mark_failed.has_value());
    EXPECT_TRUE(f.busy_decode);
  }
}

// What a request avoids accumulates over its attempts; busy workers come back with room, failed
// ones when the request waits for workers (the probes decide then), unfit ones never.
TEST(AvoidedWorkersTest, FailedUntilAWaitBusyUntilRoomUnfitForGood) {
  AvoidedWorkers avoided;
  Failover prefill_failed;
  prefill_failed.mark_failed = WorkerRole::kPrefill;
  avoided.Note(prefill_failed, 3, 7);
  Failover refused;
  refused.busy_prefill = refused.busy_decode = true;
  avoided.Note(refused, 4, 8);
  Failover cannot_hold;
  cannot_hold.skip_decode = true;
  cannot_hold.force_remote = true;
  avoided.Note(cannot_hold, std::nullopt, 9);  // a local prefill: no prefill worker to blame
  EXPECT_EQ(avoided.SkipPrefill(), std::vector<size_t>({3, 4}));
  EXPECT_EQ(avoided.SkipDecode(), std::vector<size_t>({9, 8}));
  EXPECT_TRUE(avoided.any_busy());
  EXPECT_TRUE(avoided.force_remote);
  avoided.busy_prefill.clear();
  avoided.busy_decode.clear();
  EXPECT_EQ(avoided.SkipPrefill(), std::vector<size_t>({3}));
  EXPECT_EQ(avoided.SkipDecode(), std::vector<size_t>({9}));
  Failover decode_failed;
  decode_failed.mark_failed = WorkerRole::kDecode;
  avoided.Note(decode_failed, 5, 10);
  EXPECT_EQ(avoided.SkipDecode(), std::vector<size_t>({10, 9}));
  avoided.ForgetFailed();
  EXPECT_TRUE(avoided.SkipPrefill().empty());
  EXPECT_EQ(avoided.SkipDecode(), std::vector<size_t>({9}));
}

TEST(AvoidedWorkersTest, ALocalPrefillsFailureNamesNoPrefillWorker) {
  AvoidedWorkers avoided;
  Failover f;
  f.mark_failed = WorkerRole::kPrefill;  // cannot happen for a local attempt; still safe
  f.busy_prefill = true;
  avoided.Note(f, std::nullopt, 1);
  EXPECT_TRUE(avoided.SkipPrefill().empty());
  EXPECT_FALSE(avoided.any_busy());
}

TEST(AttemptErrorTest, AStallOrAnEarlyEndSaysSoOtherwiseTheWorkersStatus) {
  AttemptEnd stalled = Decode(Code::CANCELLED);
  stalled.stalled = true;
  EXPECT_EQ(AttemptError(stalled, grpc::Status::CANCELLED).error_message(),
            "the decode worker stalled");
  const grpc::Status early = AttemptError(Decode(Code::OK), grpc::Status::OK);
  EXPECT_EQ(early.error_code(), Code::UNAVAILABLE);
  EXPECT_EQ(early.error_message(), "decode stream ended early");
  const grpc::Status down(Code::UNAVAILABLE, "connection refused");
  EXPECT_EQ(AttemptError(Prefill(Code::UNAVAILABLE), down).error_message(), "connection refused");
}

// A worker call cancelled or timed out just before the client's deadline is the client's: its own
// timer fired first and its cancel reached the worker call (the flake of
// ClusterServingTest.DepartedClientsFreeTheWorkers). A worker's own failure then, or any failure
// with time to spare, is the worker's.
TEST(FailureIsTheClientsTest, PropagatedEndsNearTheDeadlineAreTheClients) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
  const auto just_before = deadline - kDeadlineSlack / 2;
  const auto long_before = deadline - 3 * kDeadlineSlack;
  for (Code code : {Code::CANCELLED, Code::DEADLINE_EXCEEDED}) {
    EXPECT_TRUE(FailureIsTheClients(code, false, just_before, deadline)) << code;
    EXPECT_TRUE(FailureIsTheClients(code, false, deadline - kDeadlineSlack, deadline)) << code;
    EXPECT_FALSE(FailureIsTheClients(code, false, long_before, deadline)) << code;
  }
  for (Code code : {Code::UNAVAILABLE, Code::INTERNAL, Code::INVALID_ARGUMENT}) {
    EXPECT_FALSE(FailureIsTheClients(code, false, just_before, deadline)) << code;
    EXPECT_TRUE(FailureIsTheClients(code, false, deadline, deadline)) << code;
    EXPECT_TRUE(FailureIsTheClients(code, true, long_before, deadline)) << code;
  }
}

}  // namespace
}  // namespace yoco
