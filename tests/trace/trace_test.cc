// Tracing: W3C traceparent parsing, the tracer's sampling, spans, the OTLP/HTTP exporter — whose
// bodies are decoded by a receiver built on the official OTLP definitions (otlp_receiver.mjs) —
// and its bounded queue.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "lib/trace/http_post.h"
#include "lib/trace/otlp_exporter.h"
#include "lib/trace/tracer.h"
#include "tests/trace/captured_spans.h"
#include "tests/trace/otlp_receiver.h"

namespace yoco {
namespace {

using nlohmann::json;

constexpr char kExample[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceparentTest, ReadsTheSpecificationsExample) {
  std::optional<TraceContext> c = ParseTraceparent(kExample);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c->SpanIdHex(), "00f067aa0ba902b7");
  EXPECT_TRUE(c->sampled);
  EXPECT_EQ(c->Traceparent(), kExample);
  c = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->sampled);
  // Flags other than "sampled" are kept out; the sampled bit is read alone.
  c = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03");
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->sampled);
}

TEST(TraceparentTest, RefusesWhatTheSpecificationRefuses) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero span id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // 00 has no more fields
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // separator
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",    // not hex
           "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",   // later version, no '-'
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
  // A later version is read as 00 when its first fields are.
  EXPECT_TRUE(ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes")
                  .has_value());
}

TEST(TraceparentTest, TracestateIsKeptOnlyWhenPrintableAndShort) {
  EXPECT_EQ(CheckedTracestate("congo=t61rcWkgMzE"), "congo=t61rcWkgMzE");
  EXPECT_EQ(CheckedTracestate("a=\nb"), "");
  EXPECT_EQ(CheckedTracestate(std::string(513, 'a')), "");
}

TEST(TracerTest, AChildContinuesItsParentsTraceAndDecision) {
  auto sink = std::make_shared<testing::CapturedSpans>();
  const Tracer tracer(sink, /*sample_ratio=*/0.0);  // would record no trace of its own
  const TraceContext sampled = *ParseTraceparent(kExample);
  {
    Span span = tracer.StartSpan("child", SpanKind::kServer, &sampled);
    EXPECT_TRUE(span.recording());
    EXPECT_EQ(span.context().trace_id, sampled.trace_id);
    EXPECT_NE(span.context().span_id, sampled.span_id);
    EXPECT_TRUE(span.context().sampled);
  }
  ASSERT_EQ(sink->spans().size(), 1u);
  EXPECT_EQ(sink->spans()[0].parent_span_id, sampled.span_id);
  EXPECT_EQ(sink->spans()[0].kind, SpanKind::kServer);

  TraceContext unsampled = sampled;
  unsampled.sampled = false;
  Span quiet = tracer.StartSpan("quiet", SpanKind::kServer, &unsampled);
  EXPECT_FALSE(quiet.recording());
  EXPECT_EQ(quiet.context().trace_id, sampled.trace_id);  // still passed on, unsampled
  EXPECT_FALSE(quiet.context().sampled);
  quiet.End();
  EXPECT_EQ(sink->spans().size(), 1u);
}

TEST(TracerTest, OffItRecordsNothingButPassesTheCallersTraceOn) {
  const Tracer off;
  const TraceContext parent = *ParseTraceparent(kExample);
  Span span = off.StartSpan("x", SpanKind::kServer, &parent);
  EXPECT_FALSE(span.recording());
  EXPECT_EQ(span.context().Traceparent(), kExample);
  EXPECT_FALSE(off.StartSpan("root", SpanKind::kServer, nullptr).context().valid());
}

TEST(TracerTest, NewTracesAreSampledAtTheRatioByTheirIds) {
  auto sink = std::make_shared<testing::CapturedSpans>();
  const Tracer quarter(sink, 0.25);
  int sampled = 0;
  for (int i = 0; i < 4000; ++i) {
    Span root = quarter.StartSpan("root", SpanKind::kServer, nullptr);
    EXPECT_EQ(root.recording(), quarter.Samples(root.context().trace_id));
    EXPECT_EQ(root.recording(), root.context().sampled);
    sampled += root.recording();
  }
  EXPECT_NEAR(sampled, 1000, 150);  // binomial sd ~27
  EXPECT_EQ(sink->spans().size(), static_cast<size_t>(sampled));
  for (const SpanData& s : sink->spans()) EXPECT_EQ(s.parent_span_id, SpanId{});
  EXPECT_FALSE(Tracer(sink, 0.0).StartSpan("r", SpanKind::kServer, nullptr).recording());
  EXPECT_TRUE(Tracer(sink, 1.0).StartSpan("r", SpanKind::kServer, nullptr).recording());
}

TEST(SpanTest, EndsOnceWhetherEndedMovedOrDestroyed) {
  auto sink = std::make_shared<testing::CapturedSpans>();
  const Tracer tracer(sink, 1.0);
  Span a = tracer.StartSpan("a", SpanKind::kInternal, nullptr);
  a.SetAttribute("k", int64_t{1}).SetAttribute("k", "two");  // the last value wins
  Span b = std::move(a);
  a.End();  // moved from: nothing
  b.End();
  b.End();
  { Span c = tracer.StartSpan("c", SpanKind::kInternal, nullptr); }
  Span d = tracer.StartSpan("d", SpanKind::kInternal, nullptr);
  d = tracer.StartSpan("e", SpanKind::kInternal, nullptr);  // d ends when replaced
  const std::vector<SpanData> spans = sink->spans();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].name, "a");
  ASSERT_EQ(spans[0].attributes.size(), 1u);
  EXPECT_EQ(std::get<std::string>(spans[0].attributes[0].value), "two");
  EXPECT_EQ(spans[1].name, "c");
  EXPECT_EQ(spans[2].name, "d");
}

TEST(SpanTest, AFailedStatusNamesItsCodeAndAnOkOneSetsNothing) {
  auto sink = std::make_shared<testing::CapturedSpans>();
  const Tracer tracer(sink, 1.0);
  tracer.StartSpan("ok", SpanKind::kInternal, nullptr).SetStatus(absl::OkStatus()).End();
  tracer.StartSpan("failed", SpanKind::kInternal, nullptr)
      .SetStatus(absl::ResourceExhaustedError("over the budget"))
      .End();
  const std::vector<SpanData> spans = sink->spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_FALSE(spans[0].error);
  EXPECT_TRUE(spans[0].attributes.empty());
  EXPECT_TRUE(spans[1].error);
  EXPECT_EQ(spans[1].error_message, "over the budget");
  ASSERT_EQ(spans[1].attributes.size(), 1u);
  EXPECT_EQ(spans[1].attributes[0].key, "error.type");
  EXPECT_EQ(std::get<std::string>(spans[1].attributes[0].value), "RESOURCE_EXHAUSTED");
}

TEST(HttpUrlTest, ReadsHostPortAndPathAndRefusesTheRest) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl("http://collector.monitoring:4318/v1/traces");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "collector.monitoring");
  EXPECT_EQ(url->port, "4318");
  EXPECT_EQ(url->path, "/v1/traces");
  url = ParseHttpUrl("http://[::1]:4318");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->path, "/");
  url = ParseHttpUrl("http://localhost");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->port, "80");
  for (const char* bad :
       {"https://collector:4318/v1/traces", "collector:4318", "http://", "http://host:0/",
        "http://host:99999/", "http://host:x/", "http://[::1/", "http://host/a b"}) {
    EXPECT_FALSE(ParseHttpUrl(bad).ok()) << bad;
  }
}

TEST(OtlpExporterTest, TheOfficialDefinitionsDecodeEveryFieldWeSend) {
  absl::StatusOr<std::unique_ptr<testing::OtlpReceiver>> receiver = testing::OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  OtlpExporterOptions options;
  options.endpoint = (*receiver)->endpoint();
  options.resource = {"yoco-test", "9.9.9"};
  absl::StatusOr<std::shared_ptr<OtlpExporter>> exporter = OtlpExporter::Create(options);
  ASSERT_TRUE(exporter.ok()) << exporter.status();

  SpanData parent;
  parent.trace_id = ParseTraceparent(kExample)->trace_id;
  parent.span_id = NewSpanId();
  parent.name = "text_completion yoco";
  parent.kind = SpanKind::kServer;
  parent.start = absl::FromUnixNanos(1'700'000'000'123'456'789);
  parent.end = parent.start + absl::Milliseconds(250);
  parent.tracestate = "congo=t61rcWkgMzE";
  parent.attributes = {{"s", std::string("text ü")},
                       {"i", int64_t{-42}},
                       {"big", int64_t{1} << 50},
                       {"d", 0.5},
                       {"b", true}};
  parent.events = {{"first_token", parent.start + absl::Milliseconds(20), {}}};
  SpanData child;
  child.trace_id = parent.trace_id;
  child.span_id = NewSpanId();
  child.parent_span_id = parent.span_id;
  child.name = "yoco.prefill";
  child.kind = SpanKind::kClient;
  child.start = parent.start + absl::Milliseconds(1);
  child.end = parent.start + absl::Milliseconds(2);
  child.error = true;
  child.error_message = "the worker went away";
  (*exporter)->Export(parent);
  (*exporter)->Export(child);
  (*exporter)->Flush();
  EXPECT_EQ((*exporter)->stats().exported, 2u);

  const std::vector<json> spans = (*receiver)->Spans();
  ASSERT_EQ(spans.size(), 2u);
  const json& p = spans[0];
  EXPECT_EQ(p["service"], "yoco-test");
  EXPECT_EQ(p["service_version"], "9.9.9");
  EXPECT_EQ(p["scope"], "yoco-serve");
  EXPECT_EQ(p["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
  TraceContext ids;
  ids.span_id = parent.span_id;
  EXPECT_EQ(p["span_id"], ids.SpanIdHex());
  EXPECT_EQ(p["parent_span_id"], "");
  EXPECT_EQ(p["trace_state"], "congo=t61rcWkgMzE");
  EXPECT_EQ(p["name"], "text_completion yoco");
  EXPECT_EQ(p["kind"], 2);
  EXPECT_EQ(p["start_ns"], "1700000000123456789");
  EXPECT_EQ(p["end_ns"], "1700000000373456789");
  EXPECT_EQ(p["attributes"]["s"], "text ü");
  EXPECT_EQ(p["attributes"]["i"], -42);
  EXPECT_EQ(p["attributes"]["big"], int64_t{1} << 50);
  EXPECT_EQ(p["attributes"]["d"], 0.5);
  EXPECT_EQ(p["attributes"]["b"], true);
  ASSERT_EQ(p["events"].size(), 1u);
  EXPECT_EQ(p["events"][0]["name"], "first_token");
  EXPECT_EQ(p["events"][0]["time_ns"], "1700000000143456789");
  EXPECT_EQ(p["status_code"], 0);
  const json& c = spans[1];
  EXPECT_EQ(c["parent_span_id"], ids.SpanIdHex());
  EXPECT_EQ(c["kind"], 3);
  EXPECT_EQ(c["status_code"], 2);
  EXPECT_EQ(c["status_message"], "the worker went away");
}

// A TCP socket bound to a loopback port the OS picks (listening, or not), its port in `*port`;
// -1 on failure.
int LoopbackSocket(bool listening, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      (listening && listen(fd, 16) != 0) ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

TEST(OtlpExporterTest, AnUnreachableCollectorCostsTheCallerNothing) {
  // A port nothing listens on: the batch fails, Export never waits.
  int port = 0;
  const int fd = LoopbackSocket(/*listening=*/false, &port);
  ASSERT_GE(fd, 0);
  close(fd);
  OtlpExporterOptions options;
  options.endpoint = absl::StrCat("http://127.0.0.1:", port, "/v1/traces");
  options.timeout = absl::Seconds(2);
  auto exporter = OtlpExporter::Create(options);
  ASSERT_TRUE(exporter.ok());
  const absl::Time start = absl::Now();
  for (int i = 0; i < 100; ++i) (*exporter)->Export(SpanData{});
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  (*exporter)->Flush();
  EXPECT_EQ((*exporter)->stats().failed, 100u);
  EXPECT_EQ((*exporter)->stats().exported, 0u);
}

TEST(OtlpExporterTest, AFullQueueDropsAndCountsInsteadOfWaiting) {
  // A collector that accepts connections but never answers holds the exporter's thread.
  int port = 0;
  const int fd = LoopbackSocket(/*listening=*/true, &port);
  ASSERT_GE(fd, 0);
  OtlpExporterOptions options;
  options.endpoint = absl::StrCat("http://127.0.0.1:", port, "/v1/traces");
  options.max_queue = 3;
  options.max_batch = 100;                  // never a full batch: the thread sleeps
  options.flush_interval = absl::Hours(1);  // until the end
  options.timeout = absl::Milliseconds(300);
  {
    auto exporter = OtlpExporter::Create(options);
    ASSERT_TRUE(exporter.ok());
    for (int i = 0; i < 5; ++i) (*exporter)->Export(SpanData{});
    EXPECT_EQ((*exporter)->stats().dropped, 2u);
    const absl::Time start = absl::Now();
    exporter->reset();  // one timeout spent on the silent collector, then it stops
    EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  }
  close(fd);
}

}  // namespace
}  // namespace yoco
