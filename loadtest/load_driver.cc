// The load driver: one callback-API reactor per request; arrivals from a scheduler thread (open
// loop) or from completions (closed loop).
#include "loadtest/load_driver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "yoco/v1/yoco.grpc.pb.h"

namespace yoco {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

const char* FinishName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_EOS:
      return "eos";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "";
  }
}

}  // namespace

struct LoadDriver::State {
  std::unique_ptr<v1::Yoco::Stub> stub;
  const Workload* workload = nullptr;
  LoadOptions options;

  absl::Mutex mu;
  absl::CondVar changed;
  Clock::time_point start;
  Clock::time_point stop_starting;  // no request starts after this
  uint64_t next = 0;                // sessions started (a session: turns() requests; else 1)
  uint64_t in_flight = 0;
  uint64_t done = 0;
  // gRPC reactors not yet destroyed. A reactor reports its request (Finished) before it deletes
  // itself, so Run also waits for this: returning earlier let the caller tear the channel and
  // the library down under a reactor still destroying its ClientContext (a double free inside
  // gRPC's completion queue, seen once under AddressSanitizer).
  uint64_t live_calls = 0;
  uint64_t errors = 0;
  std::vector<RequestRecord> records;
  std::unique_ptr<HttpCompletionClient> http;  // HTTP mode

  void PrepareContext(grpc::ClientContext& context) const {
    context.set_deadline(std::chrono::system_clock::now() +
                         absl::ToChronoMilliseconds(options.timeout));
    if (!options.bearer_token.empty()) {
      context.AddMetadata("authorization", "Bearer " + options.bearer_token);
    }
  }

  // Whether another session may start now; reserves its first request's index. mu held.
  bool TakeNextLocked(uint64_t* index) {
    const uint64_t turns = static_cast<uint64_t>(workload->turns());
    if (options.requests > 0 && next * turns >= options.requests) return false;
    if (Clock::now() > stop_starting) return false;
    *index = options.first_index + next++ * turns;
    ++in_flight;
    return true;
  }

  void Launch(uint64_t index, PlannedRequest plan);
  // A request ended; `plan` and `answer` continue its session (chat).
  void Finished(RequestRecord record, const PlannedRequest& plan,
                const std::vector<int32_t>& answer);
};

namespace {

// Counts a reactor in State::live_calls from its construction to the end of its destruction: as
// its first member it is destroyed after all the others (the ClientContext among them).
class LiveCall {
 public:
  explicit LiveCall(LoadDriver::State& state) : state_(state) {
    absl::MutexLock lock(&state_.mu);
    ++state_.live_calls;
  }
  ~LiveCall() {
    // Notified under the lock: the waiter cannot return, and free State, before it is released.
    absl::MutexLock lock(&state_.mu);
    --state_.live_calls;
    state_.changed.SignalAll();
  }
  LiveCall(const LiveCall&) = delete;
  LiveCall& operator=(const LiveCall&) = delete;

 private:
  LoadDriver::State& state_;
};

class LoadGenerateCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  LoadGenerateCall(LoadDriver::State& state, uint64_t index, PlannedRequest plan)
      : live_(state), state_(state), plan_(std::move(plan)) {
    record_.index = index;
    record_.document = plan_.document;
    record_.prompt_tokens = static_cast<uint32_t>(plan_.prompt.size());
    record_.max_tokens = plan_.max_tokens;
    if (plan_.text.empty()) {
      request_.mutable_tokens()->mutable_ids()->Add(plan_.prompt.begin(), plan_.prompt.end());
    } else {
      request_.set_text(plan_.text);
    }
    keep_answer_ = state.workload->turns() > 1;
    request_.set_request_id(absl::StrCat("loadtest-", index));
    request_.set_cache_salt(state.options.cache_salt);
    v1::SamplingParams* s = request_.mutable_sampling();
    s->set_max_new_tokens(plan_.max_tokens);
    s->set_temperature(state.options.temperature);
    s->set_seed(state.options.seed + index);
    // Every request produces exactly max_tokens, as load tools' ignore_eos does.
    s->set_stop_at_eos(false);
  }

  void Start() {
    state_.PrepareContext(context_);
    sent_ = Clock::now();
    record_.start_s = std::chrono::duration<double>(sent_ - state_.start).count();
    state_.stub->async()->Generate(&context_, &request_, this);
    StartRead(&event_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const auto now = Clock::now();
    if (event_.has_token()) {
      if (record_.output_tokens == 0) {
        record_.ttft_ms = Ms(now - sent_);
      } else {
        record_.itl_ms.push_back(Ms(now - last_token_));
      }
      last_token_ = now;
      ++record_.output_tokens;
      if (keep_answer_) answer_.push_back(event_.token().id());
    } else if (event_.has_finish()) {
      const v1::Finish& f = event_.finish();
      record_.cached_tokens = f.usage().cached_prompt_tokens();
      record_.prompt_tokens = f.usage().prompt_tokens();  // a text prompt's, as tokenised
      record_.cache_tier = f.cache_tier();
      record_.finish_reason = FinishName(f.reason());
      if (f.has_timings()) {
        record_.server_ttft_ms = f.timings().ttft_ms();
        record_.prefill_ms = f.timings().prefill_ms();
        record_.transfer_ms = f.timings().transfer_ms();
      }
    }
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    record_.e2e_ms = Ms(Clock::now() - sent_);
    record_.status = absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
    if (!status.ok()) record_.error = status.error_message();
    state_.Finished(std::move(record_), plan_, answer_);
    delete this;
  }

 private:
  LiveCall live_;  // first: destroyed last
  LoadDriver::State& state_;
  const PlannedRequest plan_;
  bool keep_answer_ = false;
  std::vector<int32_t> answer_;  // chat: the tokens the next turn repeats
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse event_;
  RequestRecord record_;
  Clock::time_point sent_, last_token_;
};

}  // namespace

void LoadDriver::State::Launch(uint64_t index, PlannedRequest plan) {
  if (http == nullptr) {
    (new LoadGenerateCall(*this, index, std::move(plan)))->Start();
    return;
  }
  RequestRecord record;
  record.index = index;
  record.document = plan.document;
  record.prompt_tokens = static_cast<uint32_t>(plan.prompt.size());
  record.max_tokens = plan.max_tokens;
  record.start_s = std::chrono::duration<double>(Clock::now() - start).count();
  CompletionParams params;
  params.temperature = options.temperature;
  params.seed = options.seed + index;
  params.cache_salt = options.cache_salt;
  std::string body = CompletionBody(plan, options.http->model, params);
  http->Start(
      std::move(body), options.timeout,
      [this, plan = std::move(plan)](RequestRecord r) { Finished(std::move(r), plan, {}); },
      std::move(record));
}

void LoadDriver::State::Finished(RequestRecord record, const PlannedRequest& plan,
                                 const std::vector<int32_t>& answer) {
  const uint64_t index = record.index;
  const uint64_t turns = static_cast<uint64_t>(workload->turns());
  // A session's next turn follows at once; a failed turn ends its session.
  const bool next_turn = record.ok() && (index - options.first_index) % turns + 1 < turns;
  uint64_t next_index = 0;
  bool launch = false;
  {
    absl::MutexLock lock(&mu);
    if (!record.ok()) ++errors;
    records.push_back(std::move(record));
    ++done;
    if (!next_turn) {
      --in_flight;
      // Closed loop: a finished session makes room for the next.
      if (options.concurrency > 0) launch = TakeNextLocked(&next_index);
    }
    changed.SignalAll();
  }
  if (next_turn) Launch(index + 1, workload->NextTurn(plan.prompt, answer, index + 1));
  if (launch) Launch(next_index, workload->Request(next_index));
}

LoadDriver::LoadDriver(std::shared_ptr<grpc::Channel> channel, const Workload& workload,
                       LoadOptions options)
    : state_(std::make_unique<State>()) {
  state_->stub = v1::Yoco::NewStub(std::move(channel));
  state_->workload = &workload;
  state_->options = std::move(options);
  if (state_->options.http.has_value()) {
    HttpEndpoint endpoint = *state_->options.http;
    endpoint.bearer_token = state_->options.bearer_token;
    state_->http = std::make_unique<HttpCompletionClient>(std::move(endpoint), 2);
  }
}

LoadDriver::~LoadDriver() = default;

absl::Status LoadDriver::Precache(bool pin) {
  const auto& documents = state_->workload->documents();
  for (size_t k = 0; k < documents.size(); ++k) {
    grpc::ClientContext context;
    state_->PrepareContext(context);
    v1::PrecacheRequest request;
    request.mutable_tokens()->mutable_ids()->Add(documents[k].begin(), documents[k].end());
    request.set_pin(pin);
    request.set_cache_salt(state_->options.cache_salt);
    v1::PrecacheResponse response;
    const grpc::Status st = state_->stub->Precache(&context, request, &response);
    if (!st.ok()) {
      return absl::UnavailableError(
          absl::StrCat("pre-caching document ", k, ": ", st.error_message()));
    }
  }
  return absl::OkStatus();
}

std::vector<RequestRecord> LoadDriver::Run(double* duration_s) {
  State& s = *state_;
  s.start = Clock::now();
  s.stop_starting = s.options.duration == absl::InfiniteDuration()
                        ? Clock::time_point::max()
                        : s.start + absl::ToChronoNanoseconds(s.options.duration);
  bool running = true;
  std::thread progress([&s, &running] {
    absl::MutexLock lock(&s.mu);
    while (running) {
      s.changed.WaitWithTimeout(&s.mu, absl::Seconds(1));
      if (!running || !s.options.progress) continue;
      const double t = std::chrono::duration<double>(Clock::now() - s.start).count();
      std::cerr << absl::StrFormat(
                       "\r%6.1f s  sent %llu  done %llu  in flight %llu  errors %llu  %.1f req/s ",
                       t, static_cast<unsigned long long>(s.next),
                       static_cast<unsigned long long>(s.done),
                       static_cast<unsigned long long>(s.in_flight),
                       static_cast<unsigned long long>(s.errors), t > 0 ? s.done / t : 0.0)
                << std::flush;
    }
  });
  if (s.options.concurrency > 0) {
    std::vector<uint64_t> first;
    {
      absl::MutexLock lock(&s.mu);
      uint64_t index;
      while (first.size() < static_cast<size_t>(s.options.concurrency) &&
             s.TakeNextLocked(&index)) {
        first.push_back(index);
      }
    }
    for (uint64_t index : first) s.Launch(index, s.workload->Request(index));
  } else {
    // Open loop: arrival times fixed in advance (by the seed, or the replayed file), whatever
    // the server's pace.
    const bool replay = s.workload->options().kind == WorkloadKind::kReplay;
    SplitMix64 rng(s.options.seed ^ 0xA5A5A5A5A5A5A5A5ull);
    auto at = s.start;
    while (true) {
      uint64_t index;
      {
        absl::MutexLock lock(&s.mu);
        if (!s.TakeNextLocked(&index)) break;
      }
      if (replay) {  // the file's arrival times
        std::this_thread::sleep_until(
            s.start + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(s.workload->ArrivalSeconds(index))));
      }
      s.Launch(index, s.workload->Request(index));
      if (replay) continue;
      const double gap = s.options.arrivals == Arrivals::kPoisson
                             ? -std::log(1.0 - rng.Uniform()) / s.options.rate
                             : 1.0 / s.options.rate;
      at += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap));
      std::this_thread::sleep_until(at);
    }
  }
  s.mu.Lock();
  while (!(s.in_flight == 0 && s.live_calls == 0 &&
           (s.options.concurrency == 0 ||
            (s.options.requests > 0 && s.next * s.workload->turns() >= s.options.requests) ||
            Clock::now() > s.stop_starting))) {
    s.changed.Wait(&s.mu);
  }
  running = false;
  s.changed.SignalAll();
  s.mu.Unlock();
  progress.join();
  if (s.options.progress) std::cerr << "\n";
  double last_end = 0;
  for (const RequestRecord& r : s.records)
    last_end = std::max(last_end, r.start_s + r.e2e_ms / 1e3);
  *duration_s = last_end;
  std::vector<RequestRecord> records = std::move(s.records);
  std::sort(records.begin(), records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  return records;
}

}  // namespace yoco
