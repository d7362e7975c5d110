// The prefix cache through the whole stack, secured as deployed: a pre-cached document's
// questions hit and give the tokens of a miss, through eviction and a router restart; a hot
// snapshot on a busy worker is copied to an idle one; a follow-up turn hits the conversation's
// snapshot; the disk tier brings snapshots back after a worker restart and refuses corrupt and
// poisoned files (a poisoned file: state changed, every CRC recomputed, tagged without the
// cluster's cache key), serving those requests by recomputing with the same tokens; WatchCache,
// at the router and at a worker, follows where snapshots are.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "tests/cluster/serving_cluster.h"
#include "yoco/v1/worker.grpc.pb.h"

namespace yoco::testing {
namespace {

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin() + 1, b.end());  // b's BOS dropped
  return a;
}

class ClusterPrefixCacheTest : public ::testing::Test {
 protected:
  void Start(bool cache_dirs = false, std::vector<std::string> router_flags = {}) {
    ClusterOptions options;
    options.secure = true;
    options.prefill_workers = 2;
    options.decode_workers = 2;
    options.prefill_cache_dirs = cache_dirs;
    options.router_flags = std::move(router_flags);
    auto started = ServingCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
  }

  v1::PrecacheResponse Precache(const std::vector<int32_t>& document) {
    v1::PrecacheRequest request;
    request.mutable_tokens()->mutable_ids()->Add(document.begin(), document.end());
    request.set_pin(true);
    v1::PrecacheResponse response;
    grpc::ClientContext context;
    const grpc::Status st = cluster_->stub().Precache(&context, request, &response);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return response;
  }

  std::vector<v1::CacheEntry> ListCache() {
    v1::ListCacheResponse response;
    grpc::ClientContext context;
    cluster_->stub().ListCache(&context, v1::ListCacheRequest(), &response);
    return {response.entries().begin(), response.entries().end()};
  }
  int Holders(const std::string& handle) {
    int holders = 0;
    for (const v1::CacheEntry& e : ListCache()) holders += e.handle() == handle;
    return holders;
  }

  // A question after `document`: the engine's tokens, and the cache as expected.
  v1::Finish ExpectCached(const std::vector<int32_t>& document, int cached_tokens,
                          const std::string& miss_reason, const SamplingParams& sampling = {}) {
    const std::vector<int32_t> prompt = Concat(document, RandomPrompt(21, 30));
    const Generated got = cluster_->Generate(Request(prompt, 16, sampling));
    EXPECT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_EQ(got.tokens, InProcessTokens(prompt, 16, sampling));
    EXPECT_EQ(got.finish.usage().cached_prompt_tokens(), cached_tokens);
    EXPECT_EQ(got.finish.cache_miss_reason(), miss_reason);
    return got.finish;
  }

  bool BackgroundJobsDone() {
    return WaitFor([&] { return cluster_->router().Metric("yoco_router_background_jobs") == 0; },
                   absl::Seconds(10));
  }

  std::unique_ptr<ServingCluster> cluster_;
};

// Pre-cache a 400-token document (snapshot at its last block boundary, 384) with yoco-cli's
// progress lines; hits, list, evict, a miss that names the eviction, and a hit through a
// restarted router, which rebuilds its index from the workers.
TEST_F(ClusterPrefixCacheTest, HitsEqualMissesThroughEvictionAndARouterRestart) {
  Start();
  const std::vector<int32_t> doc = RandomPrompt(20, 400);
  std::vector<std::string> args = cluster_->CliFlags();
  args.insert(args.end(), {"precache", "--tokens", absl::StrJoin(doc, ","), "--pin", "--progress"});
  const ToolRun cli = RunToCompletion(BinaryPath("yoco-cli"), args, cluster_->dir() + "/cli");
  ASSERT_EQ(cli.status, 0) << cli.output;
  EXPECT_THAT(cli.output, ::testing::HasSubstr("pre-cache:  32% (128 of 400 tokens)\n"
                                               "pre-cache:  64% (256 of 400 tokens)\n"
                                               "pre-cache:  96% (384 of 400 tokens)\n"
                                               "pre-cache: 100% (400 of 400 tokens)\n"));
  EXPECT_THAT(cli.output, ::testing::HasSubstr("\"tokens\": 400, \"cached_tokens\": 384"));
  const std::vector<v1::CacheEntry> entries = ListCache();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].tokens(), 384u);
  EXPECT_TRUE(entries[0].pinned());

  ExpectCached(doc, 384, "");
  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.seed = 3;
  ExpectCached(doc, 384, "", sampled);

  v1::EvictCacheRequest evict;
  evict.set_handle(entries[0].handle());
  v1::EvictCacheResponse evicted;
  grpc::ClientContext context;
  ASSERT_TRUE(cluster_->stub().EvictCache(&context, evict, &evicted).ok());
  EXPECT_EQ(evicted.evicted(), 1);
  ExpectCached(doc, 0, "evicted");

  // That prefill saved the prompt's last full block again.
  ASSERT_TRUE(cluster_->router().Restart().ok());
  ASSERT_TRUE(cluster_->WaitUntilServing().ok());
  ExpectCached(doc, 384, "");
  EXPECT_EQ(cluster_->router().Metric("yoco_router_cache_hits_total"), 1);
  EXPECT_EQ(cluster_->router().Metric("yoco_router_cached_prompt_tokens_total"), 384);
}

// WatchCache: an external router's view of placement follows a pre-cache (stored, in memory, on
// the worker that holds it) and an eviction; a watcher that starts later gets the placement.
TEST_F(ClusterPrefixCacheTest, WatchCacheFollowsStoresAndEvictions) {
  Start();
  struct Watcher {
    grpc::ClientContext context;
    absl::Mutex mu;
    std::vector<v1::CacheEvent> events;
    std::thread reader;
    // `open` starts the stream: the router's WatchCache or a prefill worker's.
    using Open =
        std::function<std::unique_ptr<grpc::ClientReader<v1::CacheEvent>>(grpc::ClientContext*)>;
    void Start(Open open) {
      reader = std::thread([this, open] {
        auto stream = open(&context);
        v1::CacheEvent e;
        while (stream->Read(&e)) {
          absl::MutexLock lock(&mu);
          events.push_back(e);
        }
        stream->Finish();
      });
    }
    bool Saw(v1::CacheEvent::Kind kind, const std::string& handle) {
      return WaitFor(
          [&] {
            absl::MutexLock lock(&mu);
            for (const v1::CacheEvent& e : events) {
              if (e.kind() == kind && e.handle() == handle) return true;
            }
            return false;
          },
          absl::Seconds(10));
    }
    ~Watcher() {
      context.TryCancel();
      reader.join();
    }
  };
  auto at_router = [this](grpc::ClientContext* c) {
    return cluster_->stub().WatchCache(c, v1::WatchCacheRequest());
  };
  std::vector<std::unique_ptr<v1::PrefillWorker::Stub>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(v1::PrefillWorker::NewStub(cluster_->prefill(i).Channel()));
  }
  Watcher early, at_worker[2];
  early.Start(at_router);
  for (int i = 0; i < 2; ++i) {
    at_worker[i].Start([stub = workers[i].get()](grpc::ClientContext* c) {
      return stub->WatchCache(c, v1::WatchCacheRequest());
    });
  }
  Precache(RandomPrompt(24, 300));
  const std::vector<v1::CacheEntry> entries = ListCache();
  ASSERT_EQ(entries.size(), 1u);
  const std::string handle = entries[0].handle();
  EXPECT_TRUE(early.Saw(v1::CacheEvent::STORED, handle));
  {
    absl::MutexLock lock(&early.mu);
    for (const v1::CacheEvent& e : early.events) {
      if (e.handle() != handle) continue;
      EXPECT_EQ(e.tier(), "memory");
      EXPECT_EQ(e.worker(), entries[0].worker());
    }
  }
  Watcher late;
  late.Start(at_router);
  EXPECT_TRUE(late.Saw(v1::CacheEvent::STORED, handle));
  // The worker's own stream: the holder tells it, seen there at once, the other says nothing.
  const int holder = cluster_->prefill(0).address() == entries[0].worker() ? 0 : 1;
  EXPECT_TRUE(at_worker[holder].Saw(v1::CacheEvent::STORED, handle));

  v1::EvictCacheRequest evict;
  evict.set_handle(handle);
  v1::EvictCacheResponse evicted;
  grpc::ClientContext context;
  ASSERT_TRUE(cluster_->stub().EvictCache(&context, evict, &evicted).ok());
  EXPECT_TRUE(early.Saw(v1::CacheEvent::EVICTED, handle));
  EXPECT_TRUE(late.Saw(v1::CacheEvent::EVICTED, handle));
  EXPECT_TRUE(at_worker[holder].Saw(v1::CacheEvent::EVICTED, handle));
  {
    absl::MutexLock lock(&at_worker[holder].mu);
    for (const v1::CacheEvent& e : at_worker[holder].events) {
      EXPECT_EQ(e.worker(), "");  // the worker watched
      if (e.kind() == v1::CacheEvent::STORED) EXPECT_EQ(e.tier(), "memory");
    }
  }
  absl::MutexLock lock(&at_worker[1 - holder].mu);
  EXPECT_TRUE(at_worker[1 - holder].events.empty());
}

// A hot snapshot on a busy worker: the router serves the question on the idle worker and copies
// the snapshot there over UCX. The load: long prompts extending a document pre-cached on the
// same worker, so they are routed there.
TEST_F(ClusterPrefixCacheTest, AHotSnapshotIsCopiedToAnIdleWorker) {
  Start();
  const std::vector<int32_t> long_doc = RandomPrompt(34, 2048), doc = RandomPrompt(26, 400);
  const v1::PrecacheResponse held_long = Precache(long_doc), held = Precache(doc);
  ASSERT_EQ(held_long.worker(), held.worker());
  Service& busy =
      cluster_->prefill(0).address() == held.worker() ? cluster_->prefill(0) : cluster_->prefill(1);
  std::vector<std::future<Generated>> load;
  for (int s = 35; s <= 37; ++s) {
    load.push_back(std::async(std::launch::async, [&, s] {
      return cluster_->Generate(Request(Concat(long_doc, RandomPrompt(s, 2040)), 1));
    }));
  }
  EXPECT_TRUE(
      WaitFor([&] { return busy.Metric("yoco_prefill_active_requests") >= 2; }, absl::Seconds(30)));
  const std::vector<int32_t> prompt = Concat(doc, RandomPrompt(27, 30));
  const Generated got = cluster_->Generate(Request(prompt, 8));
  EXPECT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.tokens, InProcessTokens(prompt, 8));
  for (auto& f : load) EXPECT_TRUE(f.get().status.ok());
  EXPECT_TRUE(BackgroundJobsDone());
  // The receiving worker keeps the copy off its transport thread.
  EXPECT_TRUE(WaitFor([&] { return Holders(held.handle()) == 2; }, absl::Seconds(10)));
  EXPECT_GE(cluster_->router().Metric("yoco_router_snapshot_copies_total"), 1);
}

// After a request the router extends its prefill worker's cache over the generated tokens, so a
// follow-up turn that repeats the conversation hits beyond the first prompt (200 + 100
// generated tokens: the block boundary at 256, past the prompt's 128).
TEST_F(ClusterPrefixCacheTest, AFollowUpTurnHitsTheConversation) {
  Start();
  const std::vector<int32_t> turn = RandomPrompt(24, 200);
  const Generated answer = cluster_->Generate(Request(turn, 100));
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  std::vector<int32_t> conversation = turn;
  conversation.insert(conversation.end(), answer.tokens.begin(), answer.tokens.end());
  EXPECT_TRUE(BackgroundJobsDone());
  ExpectCached(conversation, 256, "");
}

// Pre-cached documents are written through to the prefill worker's --cache-dir. Restarted, it
// brings one back from disk; another's file was corrupted while it was down, a third poisoned:
// both refused, those requests recomputed with the same tokens.
TEST_F(ClusterPrefixCacheTest, TheDiskTierSurvivesARestartAndRefusesBadFiles) {
  // The questions must reach the restarted worker (the documents went to the first worker, and
  // ties go there too): a conversation snapshot still running there after the question before
  // made it the busier and sent a question to the other worker, which never held the document
  // ("evicted", not the reason the restarted worker gives).
  Start(/*cache_dirs=*/true, {"--snapshot-conversations=false"});
  const std::vector<int32_t> doc2 = RandomPrompt(22, 300), doc3 = RandomPrompt(23, 260),
                             doc5 = RandomPrompt(25, 280);
  const v1::PrecacheResponse p2 = Precache(doc2), p3 = Precache(doc3), p5 = Precache(doc5);
  ASSERT_EQ(p2.worker(), p3.worker());
  ASSERT_EQ(p2.worker(), p5.worker());
  const int index = cluster_->prefill(0).address() == p2.worker() ? 0 : 1;
  Service& worker = cluster_->prefill(index);
  const std::string cache = absl::StrCat(cluster_->dir(), "/cache", index, "/");
  ASSERT_TRUE(std::filesystem::exists(cache + p3.handle() + ".snap"));

  worker.process().Kill();
  {
    std::fstream f(cache + p3.handle() + ".snap", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    const char byte = static_cast<char>(f.get() ^ 0x55);
    f.seekp(200);
    f.put(byte);
  }
  const ToolRun poison =
      RunToCompletion("/usr/bin/python3",
                      {std::string(YOCO_TEST_SOURCE_DIR) + "/integration/poison_snapshot.py",
                       cache + p5.handle() + ".snap"},
                      cluster_->dir() + "/poison");
  ASSERT_EQ(poison.status, 0) << poison.output;
  ASSERT_TRUE(worker.Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return Holders(p2.handle()) == 1; }, absl::Seconds(10)));

  EXPECT_EQ(ExpectCached(doc2, 256, "").cache_tier(), "disk");
  ExpectCached(doc3, 0, "corrupt");
  EXPECT_THAT(worker.process().Log(),
              ::testing::HasSubstr(absl::StrCat("discarded snapshot key=", p3.handle())));
  ExpectCached(doc5, 0, "unauthenticated");
  EXPECT_THAT(worker.process().Log(), ::testing::ContainsRegex(absl::StrCat(
                                          "discarded snapshot key=", p5.handle(), " .*cache key")));
}

}  // namespace
}  // namespace yoco::testing
