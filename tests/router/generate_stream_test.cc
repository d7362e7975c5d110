// GenerateStream's retry rules end to end, against fake prefill and decode workers on in-process
// gRPC servers: the fakes' "model" is a hash of the sequence so far (so a stream continued on
// another pair must give exactly the tokens of an uninterrupted one), and each test breaks one
// step in one way and checks what the client gets and whom the router blames (its metrics).
#include "services/router/generate_stream.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "lib/engine/sampler.h"
#include "lib/log/log.h"
#include "lib/rpc/failed_peer.h"
#include "lib/rpc/invalid_field.h"
#include "lib/rpc/request_id.h"
#include "lib/text/byte_tokenizer.h"
#include "lib/trace/tracer.h"
#include "services/router/router_service.h"
#include "tests/trace/captured_spans.h"

namespace yoco {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kFingerprint = 7;

// The fake model: the next token is a letter chosen by a hash of the whole sequence.
int32_t NextToken(const std::vector<int32_t>& seq) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : seq) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>('a' + kTokenizerIdOffset + h % 26);
}

std::vector<int32_t> Reference(std::vector<int32_t> seq, size_t n) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(NextToken(seq));
    seq.push_back(out.back());
  }
  return out;
}

// The state a fake prefill "ships" to a fake decode worker: the sequence, by transfer id.
struct Bundles {
  std::mutex mu;
  std::map<uint64_t, std::vector<int32_t>> by_id;
  uint64_t next_id = 1;
};

class FakePrefill final : public v1::PrefillWorker::Service {
 public:
  explicit FakePrefill(Bundles& bundles) : bundles_(bundles) {}

  // Runs first in every Prefill call; a status other than OK is the call's answer.
  std::function<grpc::Status(grpc::ServerContext*)> before;
  std::atomic<int> calls{0};
  std::mutex mu;
  std::vector<size_t> prompt_sizes;                 // guarded by mu
  std::vector<v1::Scheduling> schedulings;          // guarded by mu
  std::atomic<uint64_t> fingerprint{kFingerprint};  // the model version it reports
  // Advertised: the router then calls PrefillStream, which writes the first token, runs
  // `after_first_token` (the bundle's transfer: a status other than OK ends the call), then
  // writes the answer.
  bool streams_first_token = false;
  std::function<grpc::Status(grpc::ServerContext*)> after_first_token;
  std::atomic<int> stream_calls{0};

  grpc::Status GetWorkerInfo(grpc::ServerContext*, const v1::GetWorkerInfoRequest*,
                             v1::WorkerInfo* info) override {
    info->set_worker_id("prefill");
    info->set_model_fingerprint(fingerprint);
    info->set_streams_first_token(streams_first_token);
    return grpc::Status::OK;
  }
  grpc::Status PrefillStream(grpc::ServerContext* context, const v1::PrefillRequest* request,
                             grpc::ServerWriter<v1::PrefillResponse>* writer) override {
    ++stream_calls;
    v1::PrefillResponse answer;
    if (grpc::Status st = Prefill(context, request, &answer); !st.ok()) return st;
    v1::PrefillResponse first;
    first.set_first_token_only(true);
    first.set_first_token(answer.first_token());
    writer->Write(first);
    if (after_first_token) {
      if (grpc::Status st = after_first_token(context); !st.ok()) return st;
    }
    writer->Write(answer);
    return grpc::Status::OK;
  }
  grpc::Status ListCache(grpc::ServerContext*, const v1::ListCacheRequest*,
                         v1::ListCacheResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override {
    ++calls;
    {
      std::lock_guard<std::mutex> lock(mu);
      prompt_sizes.push_back(request->prompt_size());
      schedulings.push_back(request->scheduling());
    }
    if (before) {
      if (grpc::Status st = before(context); !st.ok()) return st;
    }
    std::vector<int32_t> seq(request->prompt().begin(), request->prompt().end());
    seq.push_back(NextToken(seq));
    response->set_first_token(seq.back());
    response->set_bundle_shipped(true);
    std::lock_guard<std::mutex> lock(bundles_.mu);
    response->set_transfer_id(bundles_.next_id);
    bundles_.by_id[bundles_.next_id++] = std::move(seq);
    return grpc::Status::OK;
  }

 private:
  Bundles& bundles_;
};

class FakeDecode final : public v1::DecodeWorker::Service {
 public:
  explicit FakeDecode(Bundles& bundles) : bundles_(bundles) {}

  std::atomic<bool> healthy{true};
  bool offers_local_prefill = false;  // advertised
  bool prefills = true;               // what a Decode with a prompt then finds
  // Runs before the `sent`-th token of a stream; a status other than OK ends it with that.
  std::function<grpc::Status(int sent)> before_token;
  std::atomic<int> calls{0};
  std::atomic<uint64_t> fingerprint{kFingerprint};
  std::mutex mu;
  std::vector<v1::Scheduling> schedulings;  // guarded by mu

  grpc::Status GetWorkerInfo(grpc::ServerContext*, const v1::GetWorkerInfoRequest*,
                             v1::WorkerInfo* info) override {
    if (!healthy) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
    info->set_worker_id("decode");
    info->set_model_fingerprint(fingerprint);
    info->set_ucx_address("fake");
    info->set_local_prefill(offers_local_prefill);
    return grpc::Status::OK;
  }
  grpc::Status Decode(grpc::ServerContext*, const v1::DecodeRequest* request,
                      grpc::ServerWriter<v1::DecodeEvent>* writer) override {
    ++calls;
    {
      std::lock_guard<std::mutex> lock(mu);
      schedulings.push_back(request->scheduling());
    }
    std::vector<int32_t> seq;
    if (request->prompt_size() > 0) {
      if (!prefills) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this worker does not prefill");
      }
      seq.assign(request->prompt().begin(), request->prompt().end());
    } else {
      std::lock_guard<std::mutex> lock(bundles_.mu);
      auto it = bundles_.by_id.find(request->transfer_id());
      if (it == bundles_.by_id.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no bundle");
      seq = it->second;
    }
    for (uint32_t sent = 0; sent < request->max_new_tokens(); ++sent) {
      if (before_token) {
        if (grpc::Status st = before_token(static_cast<int>(sent)); !st.ok()) return st;
      }
      seq.push_back(NextToken(seq));
      v1::DecodeEvent event;
      event.mutable_token()->set_id(seq.back());
      writer->Write(event);
    }
    v1::DecodeEvent finish;
    finish.mutable_finish()->set_reason(v1::FINISH_REASON_LENGTH);
    writer->Write(finish);
    return grpc::Status::OK;
  }

 private:
  Bundles& bundles_;
};

// A FakePrefill::before that refuses the first call of all that share `refused` for load.
std::function<grpc::Status(grpc::ServerContext*)> RefuseOnceForLoad(std::atomic<bool>& refused) {
  return [&refused](grpc::ServerContext*) {
    if (!refused.exchange(true)) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
    }
    return grpc::Status::OK;
  };
}

struct Result {
  grpc::Status status;
  std::vector<int32_t> ids;
  v1::Finish finish;
  std::string request_id;     // from the trailing metadata
  std::string invalid_field;  // likewise, on INVALID_ARGUMENT
};

class GenerateStreamTest : public ::testing::Test {
 protected:
  GenerateStreamTest() {
    config_.vocab_size = 300;
    config_.max_seq_len = 4096;
    options_.probe_interval = absl::Milliseconds(50);
    options_.wait_for_workers = absl::Seconds(20);
  }
  ~GenerateStreamTest() override {
    if (router_server_) router_server_->Shutdown();
    for (auto& s : worker_servers_) s->Shutdown();
  }

  FakePrefill& AddPrefill() {
    prefills_.push_back(std::make_unique<FakePrefill>(bundles_));
    options_.prefill_workers.push_back(Serve(prefills_.back().get()));
    return *prefills_.back();
  }
  // Two decode workers; whichever streams first fails (UNAVAILABLE, "worker died") before its
  // fourth token, once.
  void AddDecodesOneDyingAfterToken3() {
    for (int i = 0; i < 2; ++i) {
      AddDecode().before_token = [this](int sent) {
        if (sent == 3 && !decode_died_.exchange(true)) {
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker died");
        }
        return grpc::Status::OK;
      };
    }
  }
  FakeDecode& AddDecode() {
    decodes_.push_back(std::make_unique<FakeDecode>(bundles_));
    options_.decode_workers.push_back(Serve(decodes_.back().get()));
    return *decodes_.back();
  }
  std::string Serve(grpc::Service* service) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    worker_servers_.push_back(builder.BuildAndStart());
    return "127.0.0.1:" + std::to_string(port);
  }

  // Starts the router over the workers added so far; with `ready`, waits until it can admit.
  void StartRouter(bool ready = true) {
    router_ = std::make_unique<RouterService>(config_, std::make_unique<ByteTokenizer>(), "byte",
                                              options_, &metrics_);
    ASSERT_TRUE(router_->Start().ok());
    grpc::ServerBuilder builder;
    builder.RegisterService(router_.get());
    router_server_ = builder.BuildAndStart();
    stub_ = v1::Yoco::NewStub(router_server_->InProcessChannel(grpc::ChannelArguments()));
    for (int i = 0; ready && !router_->CanAdmit() && i < 200; ++i) {
      std::this_thread::sleep_for(milliseconds(25));
    }
    if (ready) {
      ASSERT_TRUE(router_->CanAdmit());
    }
  }

  Result Generate(uint32_t max_new_tokens, milliseconds timeout = milliseconds(20000),
                  std::function<void(grpc::ClientContext*)> during = nullptr) {
    v1::GenerateRequest request;
    for (int32_t id : prompt_) request.mutable_tokens()->add_ids(id);
    request.mutable_sampling()->set_max_new_tokens(max_new_tokens);
    request.set_request_id(request_id_);
    request.set_model_version(model_version_);
    if (priority_.has_value()) request.set_priority(*priority_);
    for (const std::string& stop : stop_strings_)
      request.mutable_sampling()->add_stop_strings(stop);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    std::thread side;
    if (during) side = std::thread([&] { during(&context); });
    Result result;
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      if (response.has_token() && on_token_) on_token_(response.token().id());
      if (response.has_token()) result.ids.push_back(response.token().id());
      if (response.has_finish()) result.finish = response.finish();
    }
    result.status = reader->Finish();
    if (side.joinable()) side.join();
    const auto& trailers = context.GetServerTrailingMetadata();
    if (auto it = trailers.find(kRequestIdMetadata); it != trailers.end()) {
      result.request_id = std::string(it->second.data(), it->second.size());
    }
    if (auto it = trailers.find(kInvalidFieldMetadata); it != trailers.end()) {
      result.invalid_field = std::string(it->second.data(), it->second.size());
    }
    return result;
  }

  // Waits (briefly) for the router to count an outcome: it may finish after its client.
  double Outcomes(grpc::StatusCode code) {
    for (int i = 0; i < 100 && metrics_.Outcome(code).Value() == 0; ++i) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    return metrics_.Outcome(code).Value();
  }

  ModelConfig config_;
  RouterOptions options_;
  prometheus::Registry registry_;
  RouterMetrics metrics_{registry_};
  Bundles bundles_;
  std::atomic<bool> decode_died_{false};   // AddDecodesOneDyingAfterToken3's
  std::string request_id_;                 // sent with each Generate
  uint64_t model_version_ = 0;             // likewise
  std::optional<int32_t> priority_;        // likewise
  std::function<void(int32_t)> on_token_;  // Generate's, as each token arrives
  std::vector<std::string> stop_strings_;  // sent with each Generate
  const std::vector<int32_t> prompt_ = {kBosId, 'h' + kTokenizerIdOffset, 'i' + kTokenizerIdOffset};
  std::vector<std::unique_ptr<FakePrefill>> prefills_;
  std::vector<std::unique_ptr<FakeDecode>> decodes_;
  std::vector<std::unique_ptr<grpc::Server>> worker_servers_;
  std::unique_ptr<RouterService> router_;
  std::unique_ptr<grpc::Server> router_server_;
  std::unique_ptr<v1::Yoco::Stub> stub_;
};

TEST_F(GenerateStreamTest, TokensAreTheModelsAndTheStreamEndsAtTheLength) {
  AddPrefill();
  AddDecode();
  StartRouter();
  const Result r = Generate(12);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 12));
  EXPECT_EQ(r.finish.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.finish.usage().generated_tokens(), 12u);
  EXPECT_EQ(metrics_.retries.Value(), 0);
}

TEST_F(GenerateStreamTest, DecodeDiesAfterTokenKAndTheStreamContinuesExactly) {
  AddPrefill();
  AddDecodesOneDyingAfterToken3();
  StartRouter();
  const Result r = Generate(12);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 12));
  EXPECT_EQ(r.finish.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(metrics_.decode_worker_failures.Value(), 1);
  EXPECT_EQ(metrics_.prefill_worker_failures.Value(), 0);
  EXPECT_EQ(metrics_.retries.Value(), 1);
  // The retry prefilled the prompt plus the 4 tokens already sent (the prefill's + 3 decoded).
  std::lock_guard<std::mutex> lock(prefills_[0]->mu);
  EXPECT_EQ(prefills_[0]->prompt_sizes, (std::vector<size_t>{3, 7}));
  EXPECT_EQ(decodes_[0]->calls + decodes_[1]->calls, 2);
}

// A prefill worker that streams its first token: the client has it before the bundle's transfer
// (after_first_token) ends, and the stream goes on from the answer exactly.
TEST_F(GenerateStreamTest, TheFirstTokenReachesTheClientWhileTheBundleShips) {
  std::atomic<bool> client_has_first{false}, had_it{false};
  FakePrefill& prefill = AddPrefill();
  prefill.streams_first_token = true;
  prefill.after_first_token = [&](grpc::ServerContext*) {
    for (int i = 0; i < 1000 && !client_has_first; ++i)
      std::this_thread::sleep_for(milliseconds(10));
    had_it = client_has_first.load();
    return grpc::Status::OK;
  };
  AddDecode();
  StartRouter();
  on_token_ = [&](int32_t) { client_has_first = true; };
  const Result r = Generate(12);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 12));
  EXPECT_TRUE(had_it) << "the transfer ended before the client had the first token";
  EXPECT_EQ(prefill.stream_calls, 1);
  EXPECT_EQ(metrics_.retries.Value(), 0);
}

// The bundle is lost after the client had the first token (the decode worker died): the retry
// prefills the prompt plus that token on another pair, and the client gets each token once.
TEST_F(GenerateStreamTest, ABundleLostAfterTheFirstTokenRetriesFromIt) {
  std::atomic<bool> lost{false};
  FakePrefill& prefill = AddPrefill();
  prefill.streams_first_token = true;
  prefill.after_first_token = [&](grpc::ServerContext* context) {
    if (lost.exchange(true)) return grpc::Status::OK;
    context->AddTrailingMetadata(kFailedPeerMetadata, kFailedPeerDecode);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the decode worker did not take the bundle");
  };
  AddDecode();
  AddDecode();
  StartRouter();
  const Result r = Generate(12);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 12));
  EXPECT_EQ(r.finish.usage().generated_tokens(), 12u);
  EXPECT_EQ(metrics_.retries.Value(), 1);
  EXPECT_EQ(metrics_.decode_worker_failures.Value(), 1);
  EXPECT_EQ(metrics_.prefill_worker_failures.Value(), 0);
  std::lock_guard<std::mutex> lock(prefill.mu);
  EXPECT_EQ(prefill.prompt_sizes, (std::vector<size_t>{3, 4}));
}

// A stop string the streamed first token completes ends the request there: the router lets the
// prefill call go (no decode call comes for its bundle) and the stream ends.
TEST_F(GenerateStreamTest, AStopStringOnAStreamedFirstTokenEndsItAndLetsThePrefillGo) {
  std::atomic<bool> let_go{false};
  FakePrefill& prefill = AddPrefill();
  prefill.streams_first_token = true;
  prefill.after_first_token = [&](grpc::ServerContext* context) {
    for (int i = 0; i < 500 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    let_go = context->IsCancelled();
    return grpc::Status::OK;
  };
  FakeDecode& decode = AddDecode();
  StartRouter();
  const int32_t first = Reference(prompt_, 1)[0];
  stop_strings_ = {std::string(1, static_cast<char>(first - kTokenizerIdOffset))};
  const Result r = Generate(12);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, std::vector<int32_t>{first});
  EXPECT_EQ(r.finish.reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(decode.calls, 0);
  for (int i = 0; i < 200 && !let_go; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(let_go) << "the router kept the prefill call open after the request ended";
}

TEST_F(GenerateStreamTest, ARetriedRequestIsOneTraceWithSpansForEachAttempt) {
  auto captured = std::make_shared<testing::CapturedSpans>();
  SetGlobalTracer(Tracer(captured, 1.0));
  AddPrefill();
  AddDecodesOneDyingAfterToken3();
  StartRouter();
  const Result r = Generate(12);
  SetGlobalTracer(Tracer());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();

  std::map<std::string, std::vector<SpanData>> by_name;
  for (SpanData& span : captured->spans()) by_name[span.name].push_back(std::move(span));
  ASSERT_EQ(by_name["text_completion yoco"].size(), 1u);
  const SpanData& request = by_name["text_completion yoco"][0];
  EXPECT_EQ(request.kind, SpanKind::kServer);
  EXPECT_EQ(request.parent_span_id, SpanId{});  // no traceparent came: a trace of its own
  auto attribute = [](const SpanData& span, const std::string& key) -> AttributeValue {
    for (const SpanAttribute& a : span.attributes) {
      if (a.key == key) return a.value;
    }
    return std::string("(none)");
  };
  EXPECT_EQ(std::get<int64_t>(attribute(request, "yoco.retries")), 1);
  EXPECT_EQ(std::get<int64_t>(attribute(request, "gen_ai.usage.output_tokens")), 12);
  ASSERT_EQ(request.events.size(), 1u);
  EXPECT_EQ(request.events[0].name, "first_token");
  for (const char* name : {"yoco.router.choose", "yoco.prefill", "yoco.decode"}) {
    ASSERT_EQ(by_name[name].size(), 2u) << name;  // one per attempt
    for (const SpanData& span : by_name[name]) {
      EXPECT_EQ(span.trace_id, request.trace_id) << name;
      EXPECT_EQ(span.parent_span_id, request.span_id) << name;
      EXPECT_GE(span.start, request.start) << name;
      EXPECT_LE(span.end, request.end) << name;
    }
  }
  const std::vector<SpanData>& decodes = by_name["yoco.decode"];
  EXPECT_EQ(decodes[0].error + decodes[1].error, 1);  // the first died
  const SpanData& died_span = decodes[0].error ? decodes[0] : decodes[1];
  EXPECT_EQ(std::get<std::string>(attribute(died_span, "error.type")), "UNAVAILABLE");
  EXPECT_EQ(died_span.error_message, "worker died");
}

// Two model versions side by side (a rollout): the old one's decode worker dies mid-stream.
// The tokens sent came from the old weights, so the stream may only go on with them: with no
// old decode worker left it fails rather than continuing on the new version.
TEST_F(GenerateStreamTest, ARequestThatStreamedTokensRetriesOnlyOnItsVersion) {
  options_.wait_for_workers = absl::Milliseconds(300);
  AddPrefill();  // version kFingerprint, as every fake's
  AddPrefill().fingerprint = kFingerprint + 1;
  FakeDecode& dying = AddDecode();
  dying.before_token = [&dying](int sent) {
    if (sent < 3) return grpc::Status::OK;
    dying.healthy = false;  // and stays down
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker died");
  };
  AddDecode().fingerprint = kFingerprint + 1;
  StartRouter();
  const Result r = Generate(12);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(r.status.error_message(), "worker died");
  EXPECT_EQ(r.ids, std::vector<int32_t>(Reference(prompt_, 4)));  // the prefill's and 3 decoded
  EXPECT_EQ(prefills_[1]->calls.load(), 0);
  EXPECT_EQ(decodes_[1]->calls.load(), 0);
}

// The only decode worker dies mid-stream and is back a moment later (a restart): the request
// waits for it rather than failing, and the stream goes on exactly.
TEST_F(GenerateStreamTest, TheOnlyDecodeWorkerRestartingLosesNoRequest) {
  AddPrefill();
  FakeDecode& only = AddDecode();
  std::thread restart;
  only.before_token = [&](int sent) {
    if (sent != 3 || restart.joinable()) return grpc::Status::OK;
    only.healthy = false;
    restart = std::thread([&only] {
      std::this_thread::sleep_for(milliseconds(400));
      only.healthy = true;
    });
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker died");
  };
  StartRouter();
  const Result r = Generate(12);
  restart.join();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 12));
  EXPECT_EQ(only.calls.load(), 2);
  EXPECT_EQ(metrics_.retries.Value(), 1);
}

// The request's priority reaches both workers, which order their queues by it; out of range it
// is refused by name.
TEST_F(GenerateStreamTest, APriorityIsSentToBothWorkersAndCheckedForRange) {
  AddPrefill();
  AddDecode();
  StartRouter();
  ASSERT_TRUE(Generate(4).status.ok());
  priority_ = -7;
  ASSERT_TRUE(Generate(4).status.ok());
  for (const std::vector<v1::Scheduling>* got :
       {&prefills_[0]->schedulings, &decodes_[0]->schedulings}) {
    ASSERT_EQ(got->size(), 2u);
    EXPECT_EQ((*got)[0].priority(), 0);  // none asked, no tenants: the default
    EXPECT_EQ((*got)[1].priority(), -7);
    EXPECT_EQ((*got)[1].weight(), 1u);
    EXPECT_EQ((*got)[1].tenant(), "");
  }
  priority_ = 101;
  const Result refused = Generate(4);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.invalid_field, "priority");
  EXPECT_EQ(prefills_[0]->calls.load(), 2);
}

// Before any token a request is on no version yet: a failed prefill retries on the other one.
TEST_F(GenerateStreamTest, ARequestWithoutTokensRetriesOnAnyVersionButNeverMixesOne) {
  AddPrefill().before = [](grpc::ServerContext*) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "prefill worker died");
  };
  AddPrefill().fingerprint = kFingerprint + 1;
  AddDecode();
  AddDecode().fingerprint = kFingerprint + 1;
  StartRouter();
  const Result r = Generate(12);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 12));
  EXPECT_EQ(prefills_[0]->calls.load(), 1);
  EXPECT_EQ(prefills_[1]->calls.load(), 1);
  EXPECT_EQ(decodes_[0]->calls.load(), 0);  // the new prefill's bundle went to the new decode
  EXPECT_EQ(decodes_[1]->calls.load(), 1);
}

TEST_F(GenerateStreamTest, AModelVersionAskedForIsServedByItsWorkersOnly) {
  options_.wait_for_workers = absl::Milliseconds(300);
  AddPrefill();
  AddPrefill().fingerprint = kFingerprint + 1;
  AddDecode();
  AddDecode().fingerprint = kFingerprint + 1;
  StartRouter();
  v1::ModelInfo info;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_THAT(info.fingerprints(), ::testing::ElementsAre(kFingerprint, kFingerprint + 1));

  model_version_ = kFingerprint + 1;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Generate(4).status.ok());
  EXPECT_EQ(prefills_[0]->calls.load(), 0);
  EXPECT_EQ(decodes_[0]->calls.load(), 0);
  EXPECT_EQ(prefills_[1]->calls.load(), 3);
  EXPECT_EQ(decodes_[1]->calls.load(), 3);

  model_version_ = kFingerprint + 2;  // nobody runs it
  const Result r = Generate(4);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(r.status.error_message(), ::testing::HasSubstr("model_version"));
}

TEST_F(GenerateStreamTest, PrefillRefusedForLoadTriesAnotherPairAndMarksNobody) {
  std::atomic<bool> refused{false};
  for (int i = 0; i < 2; ++i) {
    AddPrefill().before = RefuseOnceForLoad(refused);
  }
  AddDecode();
  AddDecode();
  StartRouter();
  const Result r = Generate(6);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 6));
  EXPECT_EQ(prefills_[0]->calls.load(), 1);  // one each: the refusing one was not asked again
  EXPECT_EQ(prefills_[1]->calls.load(), 1);
  EXPECT_EQ(metrics_.prefill_worker_failures.Value(), 0);
  EXPECT_EQ(metrics_.decode_worker_failures.Value(), 0);
  EXPECT_EQ(metrics_.retries.Value(), 0);
  EXPECT_EQ(metrics_.load_waits.Value(), 0);
}

TEST_F(GenerateStreamTest, EveryPairRefusedForLoadWaitsForRoomThenIsServed) {
  std::atomic<bool> refused{false};
  AddPrefill().before = RefuseOnceForLoad(refused);
  AddDecode();
  StartRouter();
  const Result r = Generate(6);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 6));
  EXPECT_EQ(prefills_[0]->calls.load(), 2);
  EXPECT_EQ(metrics_.load_waits.Value(), 1);
  EXPECT_EQ(metrics_.prefill_worker_failures.Value(), 0);
  EXPECT_EQ(metrics_.retries.Value(), 0);
}

TEST_F(GenerateStreamTest, RefusedForLoadPastTheWaitIsResourceExhausted) {
  options_.max_load_wait = absl::Milliseconds(200);
  AddPrefill().before = [](grpc::ServerContext*) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  };
  AddDecode();
  StartRouter();
  const Result r = Generate(6);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(r.status.error_message(), "queue full");
  EXPECT_EQ(metrics_.prefill_worker_failures.Value(), 0);
}

// Requests waiting for room try again at the queue's pace (a place freed, its tick), not each
// time another waiter is refused: a refusal frees no place, and waking the next waiter on it
// made the waiters refuse each other in a loop at RPC speed (thousands of calls a second), in
// which whoever tried when a place did free took it, not the first in line.
TEST_F(GenerateStreamTest, ARefusalWakesNoOtherWaiter) {
  options_.max_load_wait = absl::Milliseconds(500);
  AddPrefill().before = [](grpc::ServerContext*) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  };
  AddDecode();
  StartRouter();
  std::vector<std::thread> clients;
  std::atomic<int> exhausted{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&] {
      if (Generate(6).status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++exhausted;
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(exhausted.load(), 4);
  // Four first tries, then about one a 20 ms tick (25 in the 500 ms wait), each its newcomer's
  // wake once. A loop would make thousands.
  EXPECT_LT(prefills_[0]->calls.load(), 100);
}

TEST_F(GenerateStreamTest, TheClientsDeadlineMarksNobody) {
  AddPrefill().before = [](grpc::ServerContext* context) {
    // Slow: still working when the client's deadline (propagated here) passes.
    for (int i = 0; i < 200 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "too slow");
  };
  AddDecode();
  StartRouter();
  const Result r = Generate(6, milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(Outcomes(grpc::StatusCode::DEADLINE_EXCEEDED), 1);
  EXPECT_EQ(metrics_.prefill_worker_failures.Value(), 0);
  EXPECT_EQ(metrics_.decode_worker_failures.Value(), 0);
  EXPECT_TRUE(router_->CanAdmit());
}

TEST_F(GenerateStreamTest, CancelWhileWaitingForWorkersIsCancelledAtOnce) {
  AddPrefill();
  AddDecode().healthy = false;
  StartRouter(/*ready=*/false);
  const auto start = std::chrono::steady_clock::now();
  const Result r = Generate(6, milliseconds(30000), [](grpc::ClientContext* context) {
    std::this_thread::sleep_for(milliseconds(300));
    context->TryCancel();
  });
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  // The router ended the request itself, long before its 20 s wait for workers.
  EXPECT_EQ(Outcomes(grpc::StatusCode::CANCELLED), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(prefills_[0]->calls.load(), 0);
}

TEST_F(GenerateStreamTest, NoHealthyWorkerAfterTheWaitIsUnavailable) {
  options_.wait_for_workers = absl::Milliseconds(300);
  AddPrefill();
  AddDecode().healthy = false;
  StartRouter(/*ready=*/false);
  const Result r = Generate(6);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.status.error_message().find("no healthy"), std::string::npos)
      << r.status.error_message();
}

TEST_F(GenerateStreamTest, ALocalPrefillRefusalGoesRemote) {
  options_.local_prefill_max_tokens = 128;
  AddPrefill();
  FakeDecode& decode = AddDecode();
  decode.offers_local_prefill = true;  // advertised, but it refuses when asked
  decode.prefills = false;
  StartRouter();
  const Result r = Generate(6);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, Reference(prompt_, 6));
  EXPECT_EQ(prefills_[0]->calls.load(), 1);
  EXPECT_EQ(decode.calls.load(), 2);  // the refused local prefill, then the shipped decode
  EXPECT_EQ(metrics_.decode_worker_failures.Value(), 0);
  EXPECT_EQ(metrics_.local_prefills.Value(), 1);
}

TEST_F(GenerateStreamTest, AFailingWorkerOnEveryAttemptEndsWithItsStatus) {
  options_.attempts = 2;
  for (int i = 0; i < 3; ++i) {
    AddPrefill().before = [](grpc::ServerContext*) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "broken");
    };
  }
  AddDecode();
  StartRouter();
  const Result r = Generate(6);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(r.status.error_message(), "broken");
  EXPECT_EQ(metrics_.prefill_worker_failures.Value(), 2);  // two attempts, two workers
  EXPECT_EQ(prefills_[0]->calls + prefills_[1]->calls + prefills_[2]->calls, 2);
}

// Captures the log's lines as JSON objects while it lives.
class LogCapture {
 public:
  LogCapture() {
    LogSettings settings;
    settings.format = LogFormat::kJson;
    settings.sink = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(nlohmann::json::parse(line));
    };
    ConfigureLog(std::move(settings));
  }
  ~LogCapture() { ConfigureLog(LogSettings()); }
  // The access log's lines for `request_id`.
  std::vector<nlohmann::json> Access(const std::string& request_id) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<nlohmann::json> out;
    for (const nlohmann::json& j : lines_) {
      if (j["message"] == "request finished" && j.value("request_id", "") == request_id) {
        out.push_back(j);
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<nlohmann::json> lines_;
};

TEST_F(GenerateStreamTest, TheAccessLogSaysWhoHowMuchHowFastAndWhere) {
  LogCapture log;
  AddPrefill();
  AddDecode();
  StartRouter();
  request_id_ = "rag-question-42";
  const Result r = Generate(12);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.request_id, "rag-question-42");
  const std::vector<nlohmann::json> lines = log.Access("rag-question-42");
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json& line = lines[0];
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["outcome"], "ok");
  EXPECT_EQ(line["finish_reason"], "FINISH_REASON_LENGTH");
  EXPECT_EQ(line["prompt_tokens"], prompt_.size());
  EXPECT_EQ(line["generated_tokens"], 12);
  EXPECT_EQ(line["cached_tokens"], 0);
  EXPECT_EQ(line["retries"], 0);
  EXPECT_EQ(line["prefill"], options_.prefill_workers[0]);
  EXPECT_EQ(line["decode"], options_.decode_workers[0]);
  EXPECT_GT(line["duration_ms"].get<double>(), 0);
  EXPECT_GE(line["duration_ms"].get<double>(), line["ttft_ms"].get<double>());
  EXPECT_FALSE(line.contains("error"));
}

TEST_F(GenerateStreamTest, ARequestWithoutAnIdGetsOneAndABadIdIsRefusedByName) {
  LogCapture log;
  AddPrefill();
  AddDecode();
  StartRouter();
  const Result made = Generate(2);
  ASSERT_TRUE(made.status.ok()) << made.status.error_message();
  EXPECT_THAT(made.request_id, ::testing::MatchesRegex("req-[0-9a-f]{16}"));
  EXPECT_EQ(log.Access(made.request_id).size(), 1u);
  EXPECT_NE(Generate(2).request_id, made.request_id);

  for (const std::string& bad : {std::string("two\nlines"), std::string(129, 'x')}) {
    request_id_ = bad;
    const Result r = Generate(2);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(r.invalid_field, "request_id");
    EXPECT_TRUE(r.ids.empty());
  }
}

TEST_F(GenerateStreamTest, AFailedRequestIsLoggedWithItsError) {
  LogCapture log;
  AddPrefill().before = [](grpc::ServerContext*) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the worker dislikes it");
  };
  AddDecode();
  StartRouter();
  request_id_ = "doomed";
  const Result r = Generate(4);
  ASSERT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::vector<nlohmann::json> lines = log.Access("doomed");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["outcome"], "invalid_argument");
  EXPECT_EQ(lines[0]["error"], "the worker dislikes it");
  EXPECT_EQ(lines[0]["generated_tokens"], 0);
  EXPECT_EQ(lines[0]["prefill"], options_.prefill_workers[0]);  // the worker that refused it
  EXPECT_FALSE(lines[0].contains("decode"));
}

}  // namespace
}  // namespace yoco
