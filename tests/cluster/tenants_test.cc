// Tenants end to end (router --tenants, mutual TLS): a caller is a tenant by bearer token or by
// client certificate; no or unknown credentials are UNAUTHENTICATED. Tenant A's pre-cached
// document is a hit for A only: B asking the same prompt misses (and gets the same tokens), sees
// none of A's snapshots, cannot evict A's handle (NOT_FOUND) and cannot pick a salt; a tenant's
// certificate cannot call the workers at all. The tenant file is reloaded without a restart;
// per-tenant counters appear in /metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

constexpr char kTokenA[] = "token-of-team-a-8f2b61d0c4";
constexpr char kTokenB[] = "token-of-team-b-3e9d07aa51";
constexpr char kTokenD[] = "token-of-team-d-77c1e0b2f9";
constexpr char kTokenE[] = "token-of-team-e-5a0c93d1e2";
constexpr char kTokenF[] = "token-of-team-f-c3d8e1a7b0";

// The tenant file with team-f's max_pinned_snapshot_bytes at `pinned_bytes`.
std::string TenantFile(uint64_t pinned_bytes) {
  return absl::StrCat(
      R"({"tenants": {"team-a": {"tokens": [")", kTokenA, R"("]},)", R"("team-b": {"tokens": [")",
      kTokenB, R"("]},)", R"("team-c": {"client_identities": ["team-c.clients"]},)",
      R"("team-e": {"tokens": [")", kTokenE, R"("],)",
      R"(  "limits": {"prompt_tokens_per_minute": 30}},)", R"("team-f": {"tokens": [")", kTokenF,
      R"("],)", R"(  "limits": {"max_pinned_snapshot_bytes": )", pinned_bytes, "}}}}");
}

class ClusterTenantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.secure = true;
    options.router_certificate = "router";  // the only one the workers answer
    options.bearer_token = kTokenA;
    options.prepare = [](const std::string& dir) {
      absl::Status made = MakeTestCertificate(dir, "router", "ca", 2, 150);
      if (made.ok()) made = MakeTestCertificate(dir, "stranger", "ca", 2, 300);  // no tenant's
      if (made.ok()) {
        made = MakeTestCertificate(dir, "team-c-client", "ca", 2, 400, "DNS:team-c.clients");
      }
      std::ofstream(dir + "/tenants.json") << TenantFile(1);
      return made;
    };
    http_port_ = FreePort();
    options.router_flags = {
        "--tenants", "{dir}/tenants.json", "--tenants-reload-seconds",
        "1",         "--http-listen",      absl::StrCat("127.0.0.1:", http_port_)};
    auto started = ServingCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
    dir_ = cluster_->dir();
  }

  // A stub as a caller: a bearer token with a certificate no tenant owns, or (empty token)
  // `certificate` alone.
  std::unique_ptr<v1::Yoco::Stub> As(const std::string& token,
                                     const std::string& certificate = "stranger") {
    return v1::Yoco::NewStub(grpc::CreateChannel(cluster_->router().address(),
                                                 TestCredentials(dir_, certificate, token)));
  }
  grpc::StatusCode Code(v1::Yoco::Stub& stub) {
    return Generate(stub, Request({0, 5}, 2), absl::Seconds(20)).status.error_code();
  }
  std::vector<std::string> Handles(v1::Yoco::Stub& stub) {
    v1::ListCacheResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(stub.ListCache(&context, v1::ListCacheRequest(), &response).ok());
    std::vector<std::string> handles;
    for (const v1::CacheEntry& e : response.entries()) handles.push_back(e.handle());
    return handles;
  }
  grpc::Status Evict(v1::Yoco::Stub& stub, v1::EvictCacheRequest request,
                     v1::EvictCacheResponse* response) {
    grpc::ClientContext context;
    return stub.EvictCache(&context, request, response);
  }

  std::unique_ptr<ServingCluster> cluster_;
  int http_port_ = 0;
  std::string dir_;
};

TEST_F(ClusterTenantsTest, TenantsSeeOnlyTheirOwnCache) {
  EXPECT_EQ(Code(*As("", "stranger")), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Code(*As("token-of-nobody-000000000")), grpc::StatusCode::UNAUTHENTICATED);

  auto a = As(kTokenA), b = As(kTokenB), c = As("", "team-c-client");
  const std::vector<int32_t> doc = RandomPrompt(20, 400);
  std::vector<int32_t> prompt = doc;
  const std::vector<int32_t> question = RandomPrompt(21, 30);
  prompt.insert(prompt.end(), question.begin() + 1, question.end());
  const std::vector<int32_t> want = InProcessTokens(prompt, 12);

  v1::PrecacheRequest precache;
  precache.mutable_tokens()->mutable_ids()->Add(doc.begin(), doc.end());
  precache.set_pin(true);
  v1::PrecacheResponse held;
  grpc::ClientContext context;
  ASSERT_TRUE(a->Precache(&context, precache, &held).ok());
  const Generated hit = Generate(*a, Request(prompt, 12));
  EXPECT_EQ(hit.tokens, want);
  EXPECT_EQ(hit.finish.usage().cached_prompt_tokens(), 384u);
  const Generated miss = Generate(*b, Request(prompt, 12));
  EXPECT_EQ(miss.tokens, want);
  EXPECT_EQ(miss.finish.usage().cached_prompt_tokens(), 0u);

  v1::GenerateRequest salted = Request(prompt, 2);
  salted.set_cache_salt("team-a");
  EXPECT_EQ(Generate(*b, salted).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  EXPECT_THAT(Handles(*a), ::testing::ElementsAre(held.handle()));
  EXPECT_THAT(Handles(*b), ::testing::Not(::testing::Contains(held.handle())));
  v1::EvictCacheRequest evict;
  evict.set_handle(held.handle());
  v1::EvictCacheResponse evicted;
  EXPECT_EQ(Evict(*b, evict, &evicted).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::EvictCacheRequest all;
  all.set_all(true);
  ASSERT_TRUE(Evict(*b, all, &evicted).ok());
  EXPECT_GE(evicted.evicted(), 1);  // B's own miss saved a snapshot
  EXPECT_THAT(Handles(*a), ::testing::ElementsAre(held.handle()));
  // Placement events would show every tenant's snapshots: not for tenants.
  {
    grpc::ClientContext watch;
    auto stream = a->WatchCache(&watch, v1::WatchCacheRequest());
    v1::CacheEvent event;
    EXPECT_FALSE(stream->Read(&event));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }

  // The workers' API is the router's alone: a tenant's certificate, which the router takes, is
  // PERMISSION_DENIED at every method of both workers, and A's document is still cached.
  for (const std::string cert : {"stranger", "team-c-client"}) {
    const ToolRun outsider =
        RunToCompletion(BinaryPath("forged_call"),
                        {"outsider", cluster_->prefill(0).address(), cluster_->decode(0).address(),
                         dir_ + "/ca.pem", dir_ + "/" + cert + ".pem", dir_ + "/" + cert + ".key"},
                        dir_ + "/outsider");
    EXPECT_EQ(outsider.status, 0) << cert << ": " << outsider.output;
  }
  EXPECT_THAT(Handles(*a), ::testing::ElementsAre(held.handle()));

  const Generated by_certificate = Generate(*c, Request(prompt, 12));
  EXPECT_EQ(by_certificate.tokens, want);
  EXPECT_EQ(by_certificate.finish.usage().cached_prompt_tokens(), 0u);

  // Reload: B's token revoked, D's added, without a restart; then a broken file keeps the last
  // good set.
  std::ofstream(dir_ + "/tenants.json.new")
      << absl::StrCat(R"({"tenants": {"team-a": {"tokens": [")", kTokenA, R"("]},)",
                      R"("team-c": {"client_identities": ["team-c.clients"]},)",
                      R"("team-d": {"tokens": [")", kTokenD, R"("]}}})");
  std::filesystem::rename(dir_ + "/tenants.json.new", dir_ + "/tenants.json");
  EXPECT_TRUE(
      WaitFor([&] { return Code(*As(kTokenD)) == grpc::StatusCode::OK; }, absl::Seconds(10)));
  EXPECT_EQ(Code(*b), grpc::StatusCode::UNAUTHENTICATED);
  std::ofstream(dir_ + "/tenants.json") << "not json";
  // The file is read again when a call comes after the reload interval.
  EXPECT_TRUE(WaitFor(
      [&] {
        return Code(*a) == grpc::StatusCode::OK &&
               cluster_->router().process().Log().find("keeping the last good tenant set") !=
                   std::string::npos;
      },
      absl::Seconds(10)));
  EXPECT_EQ(Code(*a), grpc::StatusCode::OK);

  Service& router = cluster_->router();
  EXPECT_GT(router.Metric("yoco_router_tenant_requests_total{tenant=\"team-a\"}"), 0);
  EXPECT_GT(router.Metric("yoco_router_tenant_generated_tokens_total{tenant=\"team-b\"}"), 0);
  EXPECT_EQ(router.Metric("yoco_router_tenant_prompt_tokens_total{tenant=\"team-c\"}"), 429);
  EXPECT_GT(router.Metric("yoco_router_unauthenticated_total"), 0);
}

// A tenant over its prompt tokens per minute is refused with RESOURCE_EXHAUSTED naming the limit
// and saying when to retry; other tenants go on.
TEST_F(ClusterTenantsTest, ATenantOverItsLimitIsToldWhichAndWhen) {
  auto e = As(kTokenE);
  const std::vector<int32_t> prompt = RandomPrompt(8, 20);
  ASSERT_TRUE(Generate(*e, Request(prompt, 2), absl::Seconds(20)).status.ok());
  grpc::ClientContext context;
  auto reader = e->Generate(&context, Request(prompt, 2));
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
  }
  const grpc::Status refused = reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr("tenant team-e used its 30 prompt tokens per minute"));
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto after = trailers.find("yoco-retry-after-ms");
  ASSERT_NE(after, trailers.end());
  int64_t ms = 0;
  ASSERT_TRUE(absl::SimpleAtoi(std::string(after->second.data(), after->second.size()), &ms));
  EXPECT_GT(ms, 15000);  // 10 tokens short at half a token a second: about 20 s
  EXPECT_LE(ms, 20000);
  EXPECT_EQ(Code(*As(kTokenB)), grpc::StatusCode::OK);  // team-b has no limits
  EXPECT_EQ(cluster_->router().Metric("yoco_router_tenant_limit_refusals_total{limit=\"prompt_"
                                      "tokens_per_minute\",tenant=\"team-e\"}"),
            1);
}

// A tenant's pinned snapshots stay under its max_pinned_snapshot_bytes: a pin that would pass it
// is undone and refused, and a tenant at its limit is refused before any work. The limit is
// changed by rewriting the tenant file (re-read every second).
TEST_F(ClusterTenantsTest, PinsStayUnderTheTenantsPinnedBytes) {
  auto f = As(kTokenF);
  auto pin = [&](uint32_t seed, v1::PrecacheResponse* response) {
    v1::PrecacheRequest request;
    const std::vector<int32_t> document = RandomPrompt(seed, 300);
    request.mutable_tokens()->mutable_ids()->Add(document.begin(), document.end());
    request.set_pin(true);
    grpc::ClientContext context;
    return f->Precache(&context, request, response);
  };
  auto set_limit = [&](uint64_t bytes) {
    std::ofstream(dir_ + "/tenants.json.new") << TenantFile(bytes);
    std::filesystem::rename(dir_ + "/tenants.json.new", dir_ + "/tenants.json");
  };
  v1::PrecacheResponse first;
  grpc::Status st = pin(1, &first);  // 1 byte: any snapshot passes it
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), ::testing::HasSubstr("max_pinned_snapshot_bytes of 1"));
  EXPECT_TRUE(Handles(*f).empty());  // undone

  set_limit(uint64_t{1} << 40);
  ASSERT_TRUE(WaitFor([&] { return pin(1, &first).ok(); }, absl::Seconds(10)));
  ASSERT_GT(first.bytes(), 0u);
  EXPECT_EQ(Handles(*f), std::vector<std::string>{first.handle()});

  set_limit(first.bytes());  // at the limit: the next pin is refused before any work
  // Once the file is re-read, even the document already pinned is refused: the check comes
  // before the work that would name the snapshot.
  v1::PrecacheResponse again;
  ASSERT_TRUE(
      WaitFor([&] { return pin(1, &again).error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED; },
              absl::Seconds(10)));
  v1::PrecacheResponse second;
  st = pin(2, &second);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(),
              ::testing::HasSubstr(absl::StrCat("holds ", first.bytes(), " bytes")));
  EXPECT_EQ(Handles(*f), std::vector<std::string>{first.handle()});

  v1::EvictCacheRequest evict;
  evict.set_handle(first.handle());
  v1::EvictCacheResponse evicted;
  ASSERT_TRUE(Evict(*f, evict, &evicted).ok());
  EXPECT_TRUE(pin(2, &second).ok());  // room again
  EXPECT_GE(cluster_->router().Metric("yoco_router_tenant_limit_refusals_total{limit=\"max_"
                                      "pinned_snapshot_bytes\",tenant=\"team-f\"}"),
            3);
}

// On the HTTP API (HTTPS with the router's certificates) a tenant over its limit gets 429 with
// Retry-After in seconds.
TEST_F(ClusterTenantsTest, OverItsLimitOnTheHttpApiATenantGets429WithRetryAfter) {
  auto post = [&](const std::string& name) {
    // -k: curl's OpenSSL refuses the test CA (no CA extensions) that gRPC accepts; what is
    // checked here is the limit, not the server's certificate.
    return RunToCompletion(
        "/usr/bin/curl",
        {"-sS", "-i", "-k", "--cert", dir_ + "/stranger.pem", "--key", dir_ + "/stranger.key", "-H",
         absl::StrCat("Authorization: Bearer ", kTokenE), "-H", "Content-Type: application/json",
         "-d", R"({"prompt": "twenty bytes of text", "max_tokens": 2})",
         absl::StrCat("https://127.0.0.1:", http_port_, "/v1/completions")},
        absl::StrCat(dir_, "/", name));
  };
  const ToolRun first = post("curl1");  // 21 of team-e's 30 prompt tokens a minute
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_THAT(first.output, ::testing::StartsWith("HTTP/1.1 200"));
  const ToolRun second = post("curl2");
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_THAT(second.output, ::testing::StartsWith("HTTP/1.1 429"));
  EXPECT_THAT(second.output, ::testing::HasSubstr("prompt tokens per minute"));
  // 12 tokens short at half a token a second: 24 s.
  EXPECT_THAT(second.output, ::testing::ContainsRegex("[Rr]etry-[Aa]fter: 2[0-9]\r\n"));
}

// The dashboard (deploy/k8s/components/monitoring) queries only series the services export: a
// renamed metric would otherwise leave an empty panel nobody notices. Each tenant panel's series
// exists once a tenant has been served and refused.
TEST_F(ClusterTenantsTest, TheDashboardQueriesSeriesTheServicesExport) {
  ASSERT_EQ(Code(*As(kTokenA)), grpc::StatusCode::OK);
  auto e = As(kTokenE);
  const std::vector<int32_t> prompt = RandomPrompt(8, 20);
  ASSERT_TRUE(Generate(*e, Request(prompt, 2), absl::Seconds(20)).status.ok());
  ASSERT_EQ(Generate(*e, Request(prompt, 2), absl::Seconds(20)).status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  std::set<std::string> exported;
  for (Service* service : {&cluster_->router(), &cluster_->prefill(0), &cluster_->decode(0)}) {
    for (const std::string& series : service->MetricSeries()) {
      exported.insert(series.substr(0, series.find('{')));
    }
  }
  ASSERT_GT(exported.size(), 20u);
  std::ifstream file(std::string(YOCO_TEST_SOURCE_DIR) +
                     "/../deploy/k8s/components/monitoring/grafana-dashboard.json");
  const nlohmann::json dashboard = nlohmann::json::parse(file);
  const std::regex metric(R"(\byoco_[a-z0-9_]+)");
  int queried = 0;
  for (const nlohmann::json& panel : dashboard["panels"]) {
    for (const nlohmann::json& target : panel["targets"]) {
      const std::string expr = target["expr"];
      for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric);
           it != std::sregex_iterator(); ++it) {
        ++queried;
        EXPECT_TRUE(exported.count(it->str()) > 0)
            << panel["title"] << " queries " << it->str() << ", which no service exports";
      }
    }
  }
  EXPECT_GT(queried, 20);
}

}  // namespace
}  // namespace yoco::testing
