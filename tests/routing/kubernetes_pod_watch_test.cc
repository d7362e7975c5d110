// k8s:// discovery: the target syntax, the API's JSON (fixtures in the API server's format:
// tests/routing/data/k8s), and KubernetesPodWatch against a scripted HTTPS server: list then
// watch, bookmarks, 410 Gone as an event and as a status (re-list), a dropped connection (watch
// again from the last version), 403 (one log line, last set kept), the token read again for
// every request, a server the CA does not vouch for.
#include "lib/routing/kubernetes_pod_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/routing/fake_kubernetes_api.h"

namespace yoco {
namespace {

using testing::FakeKubernetesApi;
using testing::ScriptedResponse;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(YOCO_K8S_FIXTURES) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& name) {
  return absl::StrSplit(Fixture(name), '\n', absl::SkipEmpty());
}

TEST(KubernetesTargetTest, ParsesAndRefuses) {
  auto t =
      KubernetesWorkerTarget::Parse("k8s://yoco/app.kubernetes.io/component=prefill?port=50061");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ns, "yoco");
  EXPECT_EQ(t->label_selector, "app.kubernetes.io/component=prefill");
  EXPECT_EQ(t->port, 50061);
  EXPECT_EQ(t->PodsPath(), "/api/v1/namespaces/yoco/pods");
  EXPECT_EQ(t->Query(false, "", 0), "labelSelector=app.kubernetes.io%2Fcomponent%3Dprefill");
  EXPECT_EQ(t->Query(true, "4711", 240),
            "labelSelector=app.kubernetes.io%2Fcomponent%3Dprefill&watch=1&allowWatchBookmarks="
            "true&timeoutSeconds=240&resourceVersion=4711");
  auto named =
      KubernetesWorkerTarget::Parse("k8s://yoco/role=decode?port=50071&tls_name=yoco-decode");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->tls_name, "yoco-decode");
  EXPECT_EQ(named->port, 50071);
  for (const char* bad :
       {"k8s://yoco/a=b", "k8s://yoco/a=b?port=0", "k8s://yoco/a=b?port=70000",
        "k8s://yoco/a=b?port=1&tls_name=", "k8s://yoco/a=b?port=1&x=y",
        "k8s://yoco/a=b?port=1&tls_name=a/b", "k8s://Yoco/a=b?port=1", "k8s://yoco/?port=1",
        "k8s:///a=b?port=1", "k8s://yoco/a=b&x=1?port=1", "k8s://yoco/a=b?prt=1", "k8s:yoco"}) {
    EXPECT_EQ(KubernetesWorkerTarget::Parse(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(KubernetesPodsTest, ReadyPodsWithoutDeletionAreWorkers) {
  absl::StatusOr<PodList> list = ParsePodList(Fixture("podlist.json"));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->resource_version, "4711");
  ASSERT_EQ(list->pods.size(), 4u);
  std::map<std::string, PodView> pods;
  for (const PodView& p : list->pods) pods[p.name] = p;
  EXPECT_TRUE(pods["yoco-prefill-0"].worker());
  EXPECT_FALSE(pods["yoco-prefill-1"].worker());  // not Ready
  EXPECT_FALSE(pods["yoco-prefill-2"].worker());  // Ready, but being deleted
  EXPECT_FALSE(pods["yoco-prefill-3"].worker());  // Pending: no IP
  EXPECT_EQ(WorkerAddresses(pods, 50061), std::vector<std::string>{"10.244.1.7:50061"});
  pods["v6"] = {"v6", "fd00::5", true, false};
  EXPECT_EQ(WorkerAddresses(pods, 1)[1], "[fd00::5]:1");
}

TEST(KubernetesPodsTest, WatchEventsAndErrors) {
  const std::vector<std::string> lines = Lines("watch.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  auto modified = ParseWatchEvent(lines[0]);
  ASSERT_TRUE(modified.ok()) << modified.status();
  EXPECT_EQ(modified->type, WatchEvent::Type::kModified);
  EXPECT_TRUE(modified->pod.worker());
  auto bookmark = ParseWatchEvent(lines[1]);
  ASSERT_TRUE(bookmark.ok());
  EXPECT_EQ(bookmark->type, WatchEvent::Type::kBookmark);
  EXPECT_EQ(bookmark->resource_version, "4800");
  auto gone = ParseWatchEvent(Lines("watch_gone.jsonl")[0]);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->type, WatchEvent::Type::kError);
  EXPECT_EQ(gone->error_code, 410);
  EXPECT_NE(ApiErrorMessage(Fixture("forbidden.json")).find("cannot watch resource"),
            std::string::npos);
  for (const char* bad : {"", "{", "[]", R"({"type":"ADDED"})", R"({"type":"X","object":{}})",
                          R"({"type":"ADDED","object":{"metadata":{}}})",
                          R"({"type":"ADDED","object":{"metadata":{"name":7}}})"}) {
    EXPECT_FALSE(ParseWatchEvent(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParsePodList(R"({"kind":"Status"})").ok());
}

class KubernetesPodWatchTest : public ::testing::Test {
 protected:
  KubernetesPodWatchTest()
      : dir_(absl::StrCat(::testing::TempDir(), "/k8s_", getpid(), "_",
                          ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    WriteToken("token-one");
  }
  ~KubernetesPodWatchTest() override { std::filesystem::remove_all(dir_); }

  void WriteToken(const std::string& token) {
    std::ofstream(dir_ + "/token.tmp") << token << "\n";
    std::filesystem::rename(dir_ + "/token.tmp", dir_ + "/token");
  }

  std::unique_ptr<KubernetesPodWatch> Watch(FakeKubernetesApi& server) {
    KubernetesApi api;
    api.host = "127.0.0.1";
    api.port = server.port();
    api.token_file = dir_ + "/token";
    api.ca_file = server.ca_file();
    PodWatchOptions options;
    options.request_timeout = absl::Seconds(5);
    options.min_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(100);
    auto target =
        KubernetesWorkerTarget::Parse("k8s://yoco/app.kubernetes.io/component=prefill?port=50061");
    return std::make_unique<KubernetesPodWatch>(api, *target, options, "test workers");
  }

  // Waits until the watch reports `want` (up to 10 s).
  static bool Eventually(KubernetesPodWatch& watch, const std::vector<std::string>& want) {
    for (int i = 0; i < 1000; ++i) {
      auto got = watch.Addresses();
      if (got.ok() && *got == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  static ScriptedResponse List() { return Whole(200, Fixture("podlist.json")); }
  // A response that is one whole body (no watch events).
  static ScriptedResponse Whole(unsigned status, std::string body) {
    ScriptedResponse r;
    r.status = status;
    r.body = std::move(body);
    return r;
  }
  static ScriptedResponse Events(std::vector<std::string> events, ScriptedResponse::End end) {
    ScriptedResponse r;
    r.events = std::move(events);
    r.end = end;
    return r;
  }

  std::string dir_;
};

TEST_F(KubernetesPodWatchTest, ListsThenFollowsTheWatch) {
  FakeKubernetesApi server(dir_);
  server.Push(List());
  server.Push(Events(Lines("watch.jsonl"), ScriptedResponse::End::kHold));
  auto watch = Watch(server);
  // Pod 1 became Ready, pod 4 was added, pod 0 deleted.
  EXPECT_TRUE(Eventually(*watch, {"10.244.2.9:50061", "10.244.3.4:50061"}));
  const auto requests = server.requests();
  ASSERT_GE(requests.size(), 2u);
  EXPECT_EQ(requests[0].target,
            "/api/v1/namespaces/yoco/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dprefill");
  EXPECT_NE(requests[1].target.find("watch=1&allowWatchBookmarks=true"), std::string::npos);
  EXPECT_NE(requests[1].target.find("resourceVersion=4711"), std::string::npos);
  EXPECT_EQ(requests[0].authorization, "Bearer token-one");
  EXPECT_EQ(watch->counters().bookmarks, 1u);
  // The server ends the watch in order (its timeoutSeconds): watched again from the last
  // event's version, not listed again.
  server.Release();
  ASSERT_TRUE(server.WaitForRequests(3));
  EXPECT_NE(server.requests()[2].target.find("watch=1"), std::string::npos);
  EXPECT_NE(server.requests()[2].target.find("resourceVersion=4812"), std::string::npos);
  watch.reset();
}

TEST_F(KubernetesPodWatchTest, GoneMeansListAgain) {
  FakeKubernetesApi server(dir_);
  server.Push(List());
  server.Push(Events(Lines("watch_gone.jsonl"), ScriptedResponse::End::kInOrder));  // an event
  server.Push(List());
  server.Push(Whole(410, R"({"kind":"Status","apiVersion":"v1","code":410,"reason":"Expired"})"));
  server.Push(List());
  auto watch = Watch(server);
  ASSERT_TRUE(server.WaitForRequests(6));
  const auto requests = server.requests();
  for (size_t i : {0, 2, 4}) {
    EXPECT_EQ(requests[i].target.find("watch=1"), std::string::npos) << i << ": a list";
  }
  for (size_t i : {1, 3, 5}) {
    EXPECT_NE(requests[i].target.find("resourceVersion=4711"), std::string::npos) << i;
  }
  EXPECT_EQ(watch->counters().gone, 2u);
  EXPECT_EQ(watch->counters().lists, 3u);
  EXPECT_TRUE(Eventually(*watch, {"10.244.1.7:50061"}));
  watch.reset();
}

TEST_F(KubernetesPodWatchTest, DroppedConnectionWatchesAgainFromTheLastVersion) {
  FakeKubernetesApi server(dir_);
  server.Push(List());
  const auto lines = Lines("watch.jsonl");
  server.Push(Events({lines[0], lines[1]}, ScriptedResponse::End::kDrop));  // up to the bookmark
  auto watch = Watch(server);
  ASSERT_TRUE(server.WaitForRequests(3));
  const auto third = server.requests()[2].target;
  EXPECT_NE(third.find("watch=1"), std::string::npos) << third;
  EXPECT_NE(third.find("resourceVersion=4800"), std::string::npos) << third;  // the bookmark's
  EXPECT_TRUE(Eventually(*watch, {"10.244.1.7:50061", "10.244.2.9:50061"}));
  EXPECT_GE(watch->counters().failures, 1u);
  watch.reset();
}

TEST_F(KubernetesPodWatchTest, ForbiddenKeepsTheLastSetAndSaysWhatToGrant) {
  FakeKubernetesApi server(dir_);
  server.Push(List());
  for (int i = 0; i < 3; ++i) server.Push(Whole(403, Fixture("forbidden.json")));
  ::testing::internal::CaptureStderr();
  auto watch = Watch(server);
  ASSERT_TRUE(server.WaitForRequests(5));
  EXPECT_TRUE(Eventually(*watch, {"10.244.1.7:50061"}));
  EXPECT_GE(watch->counters().forbidden, 3u);
  watch.reset();
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::string line = "needs get, list and watch on pods in namespace yoco";
  const size_t first = log.find(line);
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(line, first + 1), std::string::npos) << "logged more than once: " << log;
  EXPECT_NE(log.find("cannot watch resource"), std::string::npos) << log;
}

TEST_F(KubernetesPodWatchTest, ReadsTheTokenAgainForEveryRequest) {
  FakeKubernetesApi server(dir_);
  server.Push(List());
  server.Push(Events({}, ScriptedResponse::End::kHold));
  auto watch = Watch(server);
  ASSERT_TRUE(server.WaitForRequests(2));
  WriteToken("token-two");  // the kubelet rotates the projected token
  // Watches that end in order, so the client opens new ones; a request it opened before the
  // rotation (it reads the token when it opens one) may still carry the old token, but one
  // opened after must carry the new.
  for (int i = 0; i < 3; ++i) server.Push(Events({}, ScriptedResponse::End::kInOrder));
  server.Release();  // the held watch ends
  bool rotated = false;
  for (int i = 0; i < 200 && !rotated; ++i) {
    for (const auto& r : server.requests()) {
      rotated = rotated || r.authorization == "Bearer token-two";
    }
    if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto requests = server.requests();
  EXPECT_EQ(requests[0].authorization, "Bearer token-one");
  EXPECT_TRUE(rotated) << requests.size() << " requests, the last with "
                       << requests.back().authorization;
  watch.reset();
}

TEST_F(KubernetesPodWatchTest, RefusesAServerItsCaDoesNotVouchFor) {
  FakeKubernetesApi server(dir_, /*other_ca=*/true);
  server.Push(List());
  auto watch = Watch(server);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(watch->Addresses().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_GE(watch->counters().failures, 1u);
  EXPECT_TRUE(server.requests().empty());  // no request (nor token) left the client
  watch.reset();
}

TEST_F(KubernetesPodWatchTest, OversizedOrGarbledEventsFailTheWatchNotTheProcess) {
  FakeKubernetesApi server(dir_);
  server.Push(List());
  server.Push(Events({"{not json"}, ScriptedResponse::End::kInOrder));
  server.Push(Events({std::string(17 << 20, 'x')}, ScriptedResponse::End::kInOrder));  // no newline
  auto watch = Watch(server);
  ASSERT_TRUE(server.WaitForRequests(4));
  EXPECT_GE(watch->counters().failures, 2u);
  EXPECT_TRUE(Eventually(*watch, {"10.244.1.7:50061"}));  // the listed set stays
  watch.reset();
}

TEST(KubernetesApiTest, ServerSpecs) {
  auto api = KubernetesApi::FromServer("https://10.96.0.1:443");
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(api->host, "10.96.0.1");
  EXPECT_EQ(api->port, 443);
  EXPECT_EQ(KubernetesApi::FromServer("https://[fd00::1]:6443/")->host, "fd00::1");
  for (const char* bad :
       {"http://10.96.0.1:443", "https://10.96.0.1", "https://:443", "https://h:0"}) {
    EXPECT_EQ(KubernetesApi::FromServer(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace yoco
