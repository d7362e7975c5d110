// WorkerRegistry with scripted probes: health, load, in-flight requests, the snapshot index and
// its price against load, background probing.
#include "lib/routing/worker_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace yoco {
namespace {

// Three scripted workers.
struct FakeWorkers {
  std::mutex mu;
  std::vector<bool> up = {true, true, true};
  std::vector<uint32_t> load = {0, 0, 0};
  std::vector<uint64_t> generation = {0, 0, 0};
  std::vector<uint64_t> fingerprint = {42, 42, 42};  // the model version each runs
  std::vector<std::vector<IndexedSnapshot>> snapshots = {{}, {}, {}};
  std::atomic<int> list_calls{0};

  WorkerProbes Probes() {
    WorkerProbes p;
    p.info = [this](size_t i) -> absl::StatusOr<v1::WorkerInfo> {
      std::lock_guard<std::mutex> lock(mu);
      if (!up[i]) return absl::UnavailableError("down");
      v1::WorkerInfo info;
      info.set_model_fingerprint(fingerprint[i]);
      info.set_active_requests(load[i]);
      info.set_cache_generation(generation[i]);
      return info;
    };
    p.snapshots = [this](size_t i) -> absl::StatusOr<std::vector<IndexedSnapshot>> {
      ++list_calls;
      std::lock_guard<std::mutex> lock(mu);
      return snapshots[i];
    };
    return p;
  }
};

std::vector<std::string> Addresses() { return {"a:1", "b:2", "c:3"}; }

std::vector<BlockKey> Keys(int n) {
  std::vector<int32_t> tokens(n * kCacheBlockTokens, 7);
  return PrefixBlockKeys(42, "", tokens);
}

TEST(WorkerRegistryTest, PicksTheLeastLoadedHealthyWorker) {
  FakeWorkers fake;
  fake.load = {3, 1, 2};
  fake.up[1] = false;
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::ZeroDuration());
  EXPECT_FALSE(registry.healthy(1));
  auto choice = registry.Choose({.prompt_tokens = 100, .load_penalty_tokens = 1});
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->index, 2u);
  EXPECT_EQ(
      registry.Choose({.exclude = {2}, .prompt_tokens = 100, .load_penalty_tokens = 1})->index,
      0u);  // excluded after a failure
  {
    WorkerRegistry::InFlight a(registry, 2), b(registry, 2);  // 2 + 2 in flight > 3
    EXPECT_EQ(registry.Choose({.prompt_tokens = 100, .load_penalty_tokens = 1})->index, 0u);
  }
  EXPECT_EQ(registry.Choose({.prompt_tokens = 100, .load_penalty_tokens = 1})->index, 2u);
  fake.up[1] = true;
  registry.Probe(1);
  EXPECT_EQ(registry.Choose({.prompt_tokens = 100, .load_penalty_tokens = 1})->index, 1u);
  registry.MarkFailed(1);
  EXPECT_EQ(registry.Choose({.prompt_tokens = 100, .load_penalty_tokens = 1})->index, 2u);
  EXPECT_EQ(registry.fingerprint(), 42u);
}

TEST(WorkerRegistryTest, ChoosesAmongWorkersOfTheAskedModelVersionsOnly) {
  FakeWorkers fake;
  fake.fingerprint = {42, 43, 43};  // a rollout: worker 0 still runs the old weights
  fake.load = {0, 5, 1};
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::ZeroDuration());
  EXPECT_EQ(registry.HealthyFingerprints(), (std::vector<uint64_t>{42, 43}));
  EXPECT_EQ(registry.HealthyFingerprints({0}), (std::vector<uint64_t>{43}));
  const uint64_t new_version = 43, old_version = 42;
  EXPECT_EQ(registry.Choose({.prompt_tokens = 100, .load_penalty_tokens = 1})->index, 0u);
  EXPECT_EQ(registry
                .Choose({.prompt_tokens = 100,
                         .load_penalty_tokens = 1,
                         .fingerprints = absl::MakeConstSpan(&new_version, 1)})
                ->index,
            2u);  // the least loaded of version 43
  EXPECT_FALSE(registry
                   .Choose({.exclude = {0},
                            .prompt_tokens = 100,
                            .load_penalty_tokens = 1,
                            .fingerprints = absl::MakeConstSpan(&old_version, 1)})
                   .has_value());  // version 42's only worker is excluded: none, not another
  fake.up[0] = false;
  registry.Probe(0);
  EXPECT_EQ(registry.HealthyFingerprints(), (std::vector<uint64_t>{43}));
}

// Choose never waits on a probe (the router calls it on gRPC's callback threads): with none
// healthy it returns none at once and the probing thread runs early, not an interval later.
TEST(WorkerRegistryTest, NoHealthyWorkerReturnsNoneAndProbesSoon) {
  FakeWorkers fake;
  fake.up = {false, false, false};
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::Hours(1));
  {
    std::lock_guard<std::mutex> lock(fake.mu);  // the probing thread reads it
    fake.up[0] = true;                          // came up after the constructor's probe
  }
  EXPECT_FALSE(registry.Choose({.prompt_tokens = 10, .load_penalty_tokens = 1}).has_value());
  std::optional<WorkerChoice> choice;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!choice.has_value() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
    choice = registry.Choose({.prompt_tokens = 10, .load_penalty_tokens = 1});
  }
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->index, 0u);
}

TEST(WorkerRegistryTest, PricesSnapshotsAgainstLoad) {
  FakeWorkers fake;
  const auto keys = Keys(8);        // a 1024-token prefix
  fake.snapshots[0] = {{keys[3]}};  // 512 tokens cached on worker 0
  fake.snapshots[2] = {{keys[7]}};  // 1024 on worker 2
  fake.generation = {1, 0, 1};
  fake.load = {0, 0, 0};
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::ZeroDuration());
  const int64_t prompt = 8 * kCacheBlockTokens + 50;
  auto choice =
      registry.Choose({.keys = keys, .prompt_tokens = prompt, .load_penalty_tokens = 256});
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->index, 2u);
  EXPECT_EQ(choice->cached_tokens, 1024);
  // Worker 2 busy: each request costs 256 tokens, so 3 (768) outweigh its 512-token advantage.
  fake.load[2] = 3;
  registry.Probe(2);
  choice = registry.Choose({.keys = keys, .prompt_tokens = prompt, .load_penalty_tokens = 256});
  EXPECT_EQ(choice->index, 0u);
  EXPECT_EQ(choice->cached_tokens, 512);
  ASSERT_TRUE(choice->better_holder.has_value());  // the router may copy worker 2's snapshot
  EXPECT_EQ(*choice->better_holder, 2u);
  EXPECT_EQ(choice->better_cached_tokens, 1024);
  fake.load[2] = 0;
  registry.Probe(2);
  EXPECT_FALSE(registry.Choose({.keys = keys, .prompt_tokens = prompt, .load_penalty_tokens = 256})
                   ->better_holder.has_value());
}

// Decode workers list nothing: the router notes which prefix it sent each one, prefers the
// holder against load as for snapshots, and forgets what a failed worker held.
TEST(WorkerRegistryTest, NotedPrefixesArePricedAgainstLoadAndDieWithTheWorker) {
  FakeWorkers fake;
  WorkerProbes probes = fake.Probes();
  probes.snapshots = nullptr;
  WorkerRegistry registry(Addresses(), probes, absl::ZeroDuration());
  const auto keys = Keys(8);
  const int64_t prompt = 8 * kCacheBlockTokens + 50;
  registry.NoteHeld(1, keys[7]);
  auto choice =
      registry.Choose({.keys = keys, .prompt_tokens = prompt, .load_penalty_tokens = 256});
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->index, 1u);
  EXPECT_EQ(choice->cached_tokens, 1024);
  EXPECT_EQ(
      registry.Choose({.keys = Keys(2), .prompt_tokens = 300, .load_penalty_tokens = 256})->index,
      0u)
      << "another prefix: by load";
  {
    // Four requests in flight (1024 tokens) outweigh the 1024 held tokens only beyond a tie.
    WorkerRegistry::InFlight a(registry, 1), b(registry, 1), c(registry, 1), d(registry, 1),
        e(registry, 1);
    EXPECT_NE(
        registry.Choose({.keys = keys, .prompt_tokens = prompt, .load_penalty_tokens = 256})->index,
        1u);
  }
  registry.Probe(1);  // a probe keeps what was noted
  EXPECT_EQ(
      registry.Choose({.keys = keys, .prompt_tokens = prompt, .load_penalty_tokens = 256})->index,
      1u);
  registry.MarkFailed(1);
  registry.Probe(1);
  EXPECT_EQ(registry.Choose({.keys = keys, .prompt_tokens = prompt, .load_penalty_tokens = 256})
                ->cached_tokens,
            0);
}

TEST(WorkerRegistryTest, MemoryBeatsDiskForTheSameSnapshot) {
  FakeWorkers fake;
  const auto keys = Keys(4);
  fake.snapshots[0] = {{keys[3], /*disk_only=*/true}};
  fake.snapshots[1] = {{keys[3], /*disk_only=*/false}};
  fake.generation = {1, 1, 0};
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::ZeroDuration());
  auto choice = registry.Choose({.keys = keys,
                                 .prompt_tokens = 4 * kCacheBlockTokens + 10,
                                 .load_penalty_tokens = 256,
                                 .disk_penalty_tokens = 64});
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->index, 1u);
  EXPECT_EQ(choice->cached_tokens, 512);
  fake.load[1] = 1;  // a request of load outweighs the disk read
  registry.Probe(1);
  EXPECT_EQ(registry
                .Choose({.keys = keys,
                         .prompt_tokens = 4 * kCacheBlockTokens + 10,
                         .load_penalty_tokens = 256,
                         .disk_penalty_tokens = 64})
                ->index,
            0u);
}

TEST(WorkerRegistryTest, RelistsOnlyWhenTheCacheChangesAndRebuildsAfterARestart) {
  FakeWorkers fake;
  const auto keys = Keys(2);
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::ZeroDuration());
  EXPECT_EQ(fake.list_calls.load(), 3);
  registry.ProbeAll();
  EXPECT_EQ(fake.list_calls.load(), 3);  // nothing changed
  fake.snapshots[1] = {{keys[1]}};
  fake.generation[1] = 5;
  registry.ProbeAll();
  EXPECT_EQ(fake.list_calls.load(), 4);
  EXPECT_EQ(registry.Choose({.keys = keys, .prompt_tokens = 300, .load_penalty_tokens = 1})->index,
            1u);

  WorkerRegistry restarted(Addresses(), fake.Probes(), absl::ZeroDuration());
  auto choice = restarted.Choose({.keys = keys, .prompt_tokens = 300, .load_penalty_tokens = 1});
  EXPECT_EQ(choice->index, 1u);
  EXPECT_EQ(choice->cached_tokens, 256);
}

TEST(WorkerRegistryTest, BackgroundProbingNoticesFailureAndRecovery) {
  FakeWorkers fake;
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::Milliseconds(10));
  auto wait_for = [&](bool want) {
    for (int i = 0; i < 500 && registry.healthy(0) != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return registry.healthy(0) == want;
  };
  {
    std::lock_guard<std::mutex> lock(fake.mu);
    fake.up[0] = false;
  }
  EXPECT_TRUE(wait_for(false));
  {
    std::lock_guard<std::mutex> lock(fake.mu);
    fake.up[0] = true;
  }
  EXPECT_TRUE(wait_for(true));
}

// A snapshot the index saw vanish keeps its fate: expired (its TTL had passed) or evicted, so
// a miss on another worker can say why instead of "none".
TEST(WorkerRegistryTest, RemembersWhySnapshotsWentAway) {
  FakeWorkers fake;
  const auto doc = Keys(3);
  const auto other = PrefixBlockKeys(42, "salt", std::vector<int32_t>(kCacheBlockTokens, 9));
  fake.snapshots[0] = {{doc[1], false, absl::Now() - absl::Seconds(1)},  // TTL already passed
                       {other[0], false, absl::InfiniteFuture()}};
  WorkerRegistry registry(Addresses(), fake.Probes(), absl::ZeroDuration());
  EXPECT_FALSE(registry.WhyForgotten(doc).has_value());  // still held

  fake.snapshots[0] = {};  // both gone from worker 0
  fake.generation[0] = 1;
  registry.Probe(0);
  EXPECT_EQ(registry.WhyForgotten(doc), ForgottenReason::kExpired);
  EXPECT_EQ(registry.WhyForgotten(other), ForgottenReason::kEvicted);
  EXPECT_FALSE(registry.WhyForgotten(Keys(1)).has_value());  // never seen

  // Held again somewhere (pre-cached again): no longer forgotten.
  fake.snapshots[2] = {{doc[1], false, absl::InfiniteFuture()}};
  fake.generation[2] = 1;
  registry.Probe(2);
  EXPECT_FALSE(registry.WhyForgotten(doc).has_value());
}

}  // namespace
}  // namespace yoco
