// Tracing through real processes: one request, with the caller's W3C trace context, is one trace
// across the router, the prefill worker and the decode worker (the bundle's receipt under the
// prefill span that sent it), each span under the one that called it, as an OTLP receiver
// decoding with the official definitions sees them.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/cluster/serving_cluster.h"
#include "tests/trace/otlp_receiver.h"

namespace yoco::testing {
namespace {

using nlohmann::json;

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kCallerSpan[] = "00f067aa0ba902b7";

// The spans of trace kTraceId by name, once every name in `want` has come (the services send in
// batches, once a second).
std::multimap<std::string, json> TraceSpans(const OtlpReceiver& receiver,
                                            const std::vector<std::string>& want) {
  std::multimap<std::string, json> spans;
  WaitFor(
      [&] {
        spans.clear();
        for (json& span : receiver.Spans()) {
          if (span["trace_id"] == kTraceId) spans.emplace(span["name"], std::move(span));
        }
        for (const std::string& name : want) {
          if (spans.count(name) == 0) return false;
        }
        return true;
      },
      absl::Seconds(20));
  return spans;
}

class ClusterTracingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto receiver = OtlpReceiver::Start();
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = *std::move(receiver);
    const std::string endpoint = "--otlp-endpoint=" + receiver_->endpoint();
    ClusterOptions options;
    options.worker_flags = {endpoint};
    http_port_ = FreePort();
    options.router_flags = {endpoint, "--http-listen", absl::StrCat("127.0.0.1:", http_port_)};
    auto cluster = ServingCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  std::unique_ptr<OtlpReceiver> receiver_;
  std::unique_ptr<ServingCluster> cluster_;
  int http_port_ = 0;
};

TEST_F(ClusterTracingTest, OneRequestIsOneTraceAcrossTheThreeServices) {
  grpc::ClientContext context;
  context.AddMetadata("traceparent", absl::StrCat("00-", kTraceId, "-", kCallerSpan, "-01"));
  context.AddMetadata("tracestate", "congo=t61rcWkgMzE");
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  // Past --local-prefill-max-tokens: a remote prefill and a shipped bundle.
  v1::GenerateRequest request = Request(RandomPrompt(7, 200), 6);
  request.set_request_id("traced-1");
  auto stream = cluster_->stub().Generate(&context, request);
  v1::GenerateResponse event;
  int tokens = 0;
  while (stream->Read(&event)) tokens += event.has_token();
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(tokens, 6);

  const std::multimap<std::string, json> spans =
      TraceSpans(*receiver_, {"text_completion yoco-tiny", "yoco.router.choose", "yoco.prefill",
                              "yoco.decode", "yoco.prefill.run", "yoco.bundle.transfer",
                              "yoco.bundle.receive", "yoco.decode.run", "yoco.decode.admission"});
  auto one = [&](const std::string& name) -> json {
    EXPECT_EQ(spans.count(name), 1u) << name;
    auto it = spans.find(name);
    return it == spans.end() ? json::object() : it->second;
  };
  const json request_span = one("text_completion yoco-tiny");
  EXPECT_EQ(request_span["service"], "yoco-router");
  EXPECT_EQ(request_span["parent_span_id"], kCallerSpan);
  EXPECT_EQ(request_span["kind"], 2);
  EXPECT_EQ(request_span["trace_state"], "congo=t61rcWkgMzE");
  EXPECT_EQ(request_span["attributes"]["gen_ai.operation.name"], "text_completion");
  EXPECT_EQ(request_span["attributes"]["gen_ai.usage.input_tokens"], 200);
  EXPECT_EQ(request_span["attributes"]["gen_ai.usage.output_tokens"], 6);
  EXPECT_EQ(request_span["attributes"]["yoco.request_id"], "traced-1");
  EXPECT_EQ(request_span["attributes"]["yoco.finish_reason"], "FINISH_REASON_LENGTH");
  ASSERT_EQ(request_span["events"].size(), 1u);
  EXPECT_EQ(request_span["events"][0]["name"], "first_token");

  const json choose = one("yoco.router.choose");
  const json prefill = one("yoco.prefill");
  const json decode = one("yoco.decode");
  for (const json& child : {choose, prefill, decode}) {
    EXPECT_EQ(child["parent_span_id"], request_span["span_id"]) << child;
    EXPECT_EQ(child["service"], "yoco-router") << child;
  }
  EXPECT_EQ(prefill["kind"], 3);
  EXPECT_EQ(prefill["attributes"]["server.address"], cluster_->prefill(0).address());
  EXPECT_EQ(decode["attributes"]["server.address"], cluster_->decode(0).address());

  const json prefill_run = one("yoco.prefill.run");
  EXPECT_EQ(prefill_run["service"], "yoco-prefill");
  EXPECT_EQ(prefill_run["parent_span_id"], prefill["span_id"]);
  EXPECT_EQ(prefill_run["kind"], 2);
  EXPECT_EQ(prefill_run["attributes"]["gen_ai.usage.input_tokens"], 200);
  EXPECT_EQ(prefill_run["attributes"]["yoco.cache.miss_reason"].is_string(), true);
  const json transfer = one("yoco.bundle.transfer");
  EXPECT_EQ(transfer["service"], "yoco-prefill");
  EXPECT_EQ(transfer["parent_span_id"], prefill_run["span_id"]);
  EXPECT_GT(transfer["attributes"]["yoco.bundle.bytes"].get<int64_t>(), 0);
  // The bundle's UCX header carried the prefill's span to the decode worker.
  const json receive = one("yoco.bundle.receive");
  EXPECT_EQ(receive["service"], "yoco-decode");
  EXPECT_EQ(receive["parent_span_id"], prefill_run["span_id"]);
  EXPECT_EQ(receive["kind"], 5);
  EXPECT_EQ(receive["attributes"]["yoco.transfer_id"], transfer["attributes"]["yoco.transfer_id"]);
  EXPECT_EQ(receive["attributes"]["yoco.bundle.bytes"],
            transfer["attributes"]["yoco.bundle.bytes"]);

  const json decode_run = one("yoco.decode.run");
  EXPECT_EQ(decode_run["service"], "yoco-decode");
  EXPECT_EQ(decode_run["parent_span_id"], decode["span_id"]);
  EXPECT_EQ(decode_run["attributes"]["gen_ai.usage.output_tokens"], 5);  // the first: prefill's
  EXPECT_EQ(one("yoco.decode.admission")["parent_span_id"], decode_run["span_id"]);

  // Each child lies within its parent's time.
  auto within = [](const json& child, const json& parent) {
    return std::stoull(child["start_ns"].get<std::string>()) >=
               std::stoull(parent["start_ns"].get<std::string>()) &&
           std::stoull(child["end_ns"].get<std::string>()) <=
               std::stoull(parent["end_ns"].get<std::string>());
  };
  EXPECT_TRUE(within(prefill, request_span));
  EXPECT_TRUE(within(decode, request_span));

  // The access log names the trace.
  EXPECT_TRUE(WaitFor(
      [&] {
        return cluster_->router().process().Log().find(absl::StrCat("trace_id=", kTraceId)) !=
               std::string::npos;
      },
      absl::Seconds(5)))
      << cluster_->router().process().LogTail();
}

TEST_F(ClusterTracingTest, TheHttpApiContinuesTheCallersTraceAndAMalformedOneStartsAnother) {
  const std::string url = absl::StrCat("http://127.0.0.1:", http_port_, "/v1/completions");
  const ToolRun run =
      RunToCompletion("/usr/bin/curl",
                      {"-sS", "-H", "Content-Type: application/json", "-H",
                       absl::StrCat("traceparent: 00-", kTraceId, "-", kCallerSpan, "-01"), "-d",
                       R"({"prompt": "hello", "max_tokens": 3})", url},
                      cluster_->dir() + "/curl.log");
  ASSERT_EQ(run.status, 0) << run.output;
  const std::multimap<std::string, json> spans =
      TraceSpans(*receiver_, {"text_completion yoco-tiny", "yoco.decode.run"});
  ASSERT_EQ(spans.count("text_completion yoco-tiny"), 1u) << run.output;
  EXPECT_EQ(spans.find("text_completion yoco-tiny")->second["parent_span_id"], kCallerSpan);

  // Upper-case hex is no traceparent: the router starts a trace of its own (a root span).
  const size_t before = receiver_->Spans().size();
  const ToolRun malformed =
      RunToCompletion("/usr/bin/curl",
                      {"-sS", "-H", "Content-Type: application/json", "-H",
                       "traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", "-d",
                       R"({"prompt": "hello again", "max_tokens": 2})", url},
                      cluster_->dir() + "/curl2.log");
  ASSERT_EQ(malformed.status, 0) << malformed.output;
  json root;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::vector<json> all = receiver_->Spans();
        for (size_t i = before; i < all.size(); ++i) {
          if (all[i]["name"] == "text_completion yoco-tiny") root = all[i];
        }
        return !root.is_null();
      },
      absl::Seconds(20)));
  EXPECT_EQ(root["parent_span_id"], "");
  EXPECT_NE(root["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
}

}  // namespace
}  // namespace yoco::testing
