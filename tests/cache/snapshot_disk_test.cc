// The disk tier: the file format's checks, spilling under the memory budget, surviving a
// restart, refusing corrupt files and other models' files (and saying so on the next miss),
// its own byte budget, eviction and TTL; and SnapshotChanges following all of it as events.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "lib/cache/kv_block_file.h"
#include "lib/cache/snapshot_changes.h"
#include "lib/cache/snapshot_disk_tier.h"
#include "lib/cache/snapshot_file.h"
#include "lib/cache/snapshot_store.h"
#include "tests/cache/snapshot_test_states.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

constexpr uint64_t kFingerprint = 0xfeedf00d;

class SnapshotDiskTest : public ::testing::Test {
 protected:
  SnapshotDiskTest() : config_(testing::SmallConfig()) {
    dir_ = ::testing::TempDir() + "/yoco_snapshots_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  ~SnapshotDiskTest() override { std::filesystem::remove_all(dir_); }

  SequenceState State(int64_t n, uint32_t seed) { return testing::RandomState(config_, n, seed); }

  std::unique_ptr<SnapshotStore> OpenStore(int64_t memory_budget, int64_t disk_budget,
                                           uint64_t fingerprint = kFingerprint,
                                           std::vector<DiscardedSnapshot>* discarded = nullptr) {
    std::vector<DiscardedSnapshot> local;
    if (discarded == nullptr) discarded = &local;
    auto disk =
        SnapshotDiskTier::Open({dir_, disk_budget, cache_key_}, config_, fingerprint, discarded);
    EXPECT_TRUE(disk.ok()) << disk.status();
    SnapshotStoreOptions options;
    options.budget_bytes = memory_budget;
    options.now = [this] { return now_; };
    auto store = std::make_unique<SnapshotStore>(config_, options, std::move(*disk));
    store->ReportDiscarded(*discarded);
    return store;
  }

  std::string FileOf(const BlockKey& key) { return dir_ + "/" + key.Hex() + ".snap"; }
  std::string BlockFileOf(const BlockKey& key) { return dir_ + "/" + key.Hex() + ".kvb"; }

  void FlipByte(const std::string& path, size_t offset_from_end) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff at = static_cast<std::streamoff>(f.tellg()) - offset_from_end;
    f.seekg(at);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(at);
    f.write(&c, 1);
  }

  int64_t OneSnapshotBytes() const {
    return testing::SnapshotBlockBytes(config_) + testing::SnapshotStateBytes(config_);
  }

  ModelConfig config_;
  std::string dir_;
  std::string cache_key_;  // the disk tier's
  absl::Time now_ = absl::FromUnixSeconds(1000000);
};

TEST_F(SnapshotDiskTest, FileRoundTripsAndRefusesDamage) {
  SnapshotFile file;
  file.tokens = testing::RandomTokens(256, 96, 1);
  file.chain = PrefixBlockKeys(kFingerprint, "", file.tokens);
  file.state = State(256, 1);
  file.pinned = true;
  file.expires = absl::FromUnixMillis(123456789);
  const std::string key = "cluster-cache-key-0123456789";
  const std::string bytes = SerializeSnapshotFile(file, kFingerprint, key);
  auto back = ParseSnapshotFile(bytes, config_, kFingerprint, key);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->chain, file.chain);
  EXPECT_EQ(back->tokens, file.tokens);
  EXPECT_TRUE(back->state == file.state);
  EXPECT_TRUE(back->pinned);
  EXPECT_EQ(back->expires, file.expires);

  EXPECT_EQ(ParseSnapshotFile(bytes, config_, kFingerprint + 1, key).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Accidents fail the CRC (its last byte sits 33 bytes from the end, before the tag).
  for (size_t at : {size_t{9}, size_t{40}, bytes.size() / 2, bytes.size() - 33}) {
    std::string bad = bytes;
    bad[at] ^= 1;
    EXPECT_EQ(ParseSnapshotFile(bad, config_, kFingerprint, key).status().code(),
              absl::StatusCode::kDataLoss)
        << "byte " << at;
  }
  std::string bad_tag = bytes;
  bad_tag[bytes.size() - 2] ^= 1;
  EXPECT_EQ(ParseSnapshotFile(bad_tag, config_, kFingerprint, key).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseSnapshotFile(bytes, config_, kFingerprint, "another-cluster-key").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseSnapshotFile(bytes, config_, kFingerprint, "").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseSnapshotFile(bytes.substr(0, bytes.size() - 7), config_, kFingerprint, key)
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseSnapshotFile("junk", config_, kFingerprint, key).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(SnapshotDiskTest, ManifestAndBlockFilesRoundTripAndRefuseDamage) {
  SnapshotManifest manifest;
  const std::vector<int32_t> tokens = testing::RandomTokens(256, 96, 1);
  manifest.chain = PrefixBlockKeys(kFingerprint, "", tokens);
  manifest.first_block.assign(tokens.begin(), tokens.begin() + 128);
  manifest.self_states = State(256, 1).self_states;
  manifest.pinned = true;
  manifest.expires = absl::FromUnixMillis(123456789);
  const std::string key = "cluster-cache-key-0123456789";
  const std::string bytes = SerializeSnapshotManifest(manifest, kFingerprint, key);
  absl::StatusOr<uint64_t> size = SnapshotFileBytes(bytes, config_);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, bytes.size());
  auto back = ParseSnapshotManifest(bytes, config_, kFingerprint, key);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->chain, manifest.chain);
  EXPECT_EQ(back->first_block, manifest.first_block);
  EXPECT_EQ(back->self_states, manifest.self_states);
  EXPECT_TRUE(back->pinned);
  EXPECT_EQ(back->expires, manifest.expires);
  EXPECT_EQ(ParseSnapshotManifest(bytes, config_, kFingerprint + 1, key).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::string bad = bytes;
  bad[bytes.size() / 2] ^= 1;
  EXPECT_EQ(ParseSnapshotManifest(bad, config_, kFingerprint, key).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseSnapshotManifest(bytes, config_, kFingerprint, "").status().code(),
            absl::StatusCode::kUnauthenticated);
  // A version-2 reader is told the version, not fed the wrong layout.
  EXPECT_EQ(ParseSnapshotFile(bytes, config_, kFingerprint, key).status().code(),
            absl::StatusCode::kFailedPrecondition);

  const SequenceState state = State(128, 2);
  KvBlockRows rows;
  rows.tokens = manifest.first_block;
  rows.k.resize(state.shared_k.bytes());
  rows.v.resize(state.shared_v.bytes());
  state.shared_k.CopyRowBytes(0, 128, reinterpret_cast<uint8_t*>(rows.k.data()));
  state.shared_v.CopyRowBytes(0, 128, reinterpret_cast<uint8_t*>(rows.v.data()));
  const std::string block =
      SerializeKvBlockFile(manifest.chain[0], rows, config_, kFingerprint, key);
  EXPECT_EQ(block.size(), KvBlockFileBytes(config_));
  auto rows_back = ParseKvBlockFile(block, manifest.chain[0], config_, kFingerprint, key);
  ASSERT_TRUE(rows_back.ok()) << rows_back.status();
  EXPECT_EQ(rows_back->tokens, rows.tokens);
  EXPECT_EQ(rows_back->k, rows.k);
  EXPECT_EQ(rows_back->v, rows.v);
  EXPECT_EQ(ParseKvBlockFile(block, manifest.chain[1], config_, kFingerprint, key).status().code(),
            absl::StatusCode::kDataLoss);  // another block's name
  EXPECT_EQ(
      ParseKvBlockFile(block, manifest.chain[0], config_, kFingerprint + 1, key).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseKvBlockFile(block, manifest.chain[0], config_, kFingerprint, "wrong-key")
                .status()
                .code(),
            absl::StatusCode::kUnauthenticated);
  for (size_t at : {size_t{3}, size_t{60}, block.size() / 2, block.size() - 33}) {
    std::string damaged = block;
    damaged[at] ^= 1;
    EXPECT_EQ(
        ParseKvBlockFile(damaged, manifest.chain[0], config_, kFingerprint, key).status().code(),
        absl::StatusCode::kDataLoss)
        << "byte " << at;
  }
  EXPECT_EQ(ParseKvBlockFile(block.substr(1), manifest.chain[0], config_, kFingerprint, key)
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

// A document pre-cached with a snapshot every block writes each block's rows once: the disk
// grows with the document, not with the square of it. Every snapshot loads back exactly, also
// after a restart, and a block goes only with the last snapshot that holds it.
TEST_F(SnapshotDiskTest, SnapshotsOfOneDocumentShareTheirBlocksOnDisk) {
  const auto doc = testing::RandomTokens(4 * 128, 96, 50);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  const SequenceState full = State(4 * 128, 50);
  std::vector<SequenceState> states;
  for (int64_t n = 1; n <= 4; ++n) {  // the state at each boundary: the rows so far
    SequenceState s = full;
    s.position = n * 128;
    s.shared_k.Resize(n * 128);
    s.shared_v.Resize(n * 128);
    s.self_states[0][0] = static_cast<float>(n);  // each boundary's own recurrent state
    states.push_back(std::move(s));
  }
  SnapshotRetention pin;
  pin.pinned = true;
  int64_t bytes = 0;
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    for (int n = 1; n <= 4; ++n) {
      ASSERT_TRUE(
          store->Insert(absl::MakeConstSpan(keys).subspan(0, n), doc, states[n - 1], pin).ok());
    }
    bytes = store->stats().disk_bytes;
  }
  const int64_t manifest = static_cast<int64_t>(std::filesystem::file_size(FileOf(keys[0])));
  const int64_t block = static_cast<int64_t>(KvBlockFileBytes(config_));
  int64_t manifests = 0;
  for (int n = 0; n < 4; ++n) {
    manifests += static_cast<int64_t>(std::filesystem::file_size(FileOf(keys[n])));
  }
  EXPECT_EQ(bytes, manifests + 4 * block);  // not 1 + 2 + 3 + 4 blocks
  EXPECT_GT(manifest, 0);

  auto disk =
      SnapshotDiskTier::Open({dir_, int64_t{1} << 30, cache_key_}, config_, kFingerprint, nullptr);
  ASSERT_TRUE(disk.ok()) << disk.status();
  EXPECT_EQ((*disk)->size(), 4u);
  EXPECT_EQ((*disk)->blocks(), 4u);
  EXPECT_EQ((*disk)->bytes(), bytes);
  for (int n = 1; n <= 4; ++n) {
    absl::StatusOr<SnapshotFile> file = (*disk)->Load(keys[n - 1]);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_TRUE(file->state == states[n - 1]) << n;
  }
  EXPECT_TRUE((*disk)->Remove(keys[3]));  // its last block goes with it, the others stay
  EXPECT_EQ((*disk)->blocks(), 3u);
  EXPECT_FALSE(std::filesystem::exists(BlockFileOf(keys[3])));
  EXPECT_TRUE((*disk)->Remove(keys[0]));  // block 0 is still the others'
  EXPECT_EQ((*disk)->blocks(), 3u);
  absl::StatusOr<SnapshotFile> file = (*disk)->Load(keys[2]);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->state == states[2]);
  EXPECT_EQ((*disk)->RemoveAll(), 2u);
  EXPECT_EQ((*disk)->blocks(), 0u);
  EXPECT_EQ((*disk)->bytes(), 0);
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
}

// A folder of version-2 files (rows inside each snapshot) is taken over: each becomes a manifest
// and block files, and loads to the same state; a block no manifest names (a write cut short)
// is deleted.
TEST_F(SnapshotDiskTest, VersionTwoFilesAreConvertedAndStrayBlocksRemoved) {
  std::filesystem::create_directories(dir_);
  SnapshotFile file;
  file.tokens = testing::RandomTokens(256, 96, 60);
  file.chain = PrefixBlockKeys(kFingerprint, "", file.tokens);
  file.state = State(256, 60);
  file.pinned = true;
  std::ofstream(FileOf(file.chain.back()), std::ios::binary)
      << SerializeSnapshotFile(file, kFingerprint, cache_key_);
  BlockKey stray;
  stray.bytes.fill(0x42);
  std::ofstream(BlockFileOf(stray), std::ios::binary)
      << std::string(KvBlockFileBytes(config_), 'x');
  std::vector<DiscardedSnapshot> discarded;
  auto disk = SnapshotDiskTier::Open({dir_, int64_t{1} << 30, cache_key_}, config_, kFingerprint,
                                     &discarded);
  ASSERT_TRUE(disk.ok()) << disk.status();
  EXPECT_TRUE(discarded.empty());
  EXPECT_EQ((*disk)->size(), 1u);
  EXPECT_EQ((*disk)->blocks(), 2u);
  EXPECT_FALSE(std::filesystem::exists(BlockFileOf(stray)));
  EXPECT_TRUE(std::filesystem::exists(BlockFileOf(file.chain[0])));
  absl::StatusOr<SnapshotFile> back = (*disk)->Load(file.chain.back());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->state == file.state);
  EXPECT_TRUE(back->pinned);
}

TEST_F(SnapshotDiskTest, MemoryBudgetSpillsToDiskAndHitsComeBackExactly) {
  auto store = OpenStore(OneSnapshotBytes(), int64_t{1} << 30);
  const auto a = testing::RandomTokens(128, 96, 2), b = testing::RandomTokens(128, 96, 3);
  const auto ka = PrefixBlockKeys(kFingerprint, "", a), kb = PrefixBlockKeys(kFingerprint, "", b);
  const SequenceState sa = State(128, 2), sb = State(128, 3);
  ASSERT_TRUE(store->Insert(ka, a, sa, {}).ok());
  ASSERT_TRUE(store->Insert(kb, b, sb, {}).ok());  // a goes to disk
  EXPECT_EQ(store->stats().spills, 1u);
  EXPECT_EQ(store->stats().disk_snapshots, 1);
  EXPECT_TRUE(std::filesystem::exists(FileOf(ka[0])));

  SnapshotHit hit = store->Lookup(ka, a);
  ASSERT_EQ(hit.tokens, 128);
  EXPECT_EQ(hit.tier, CacheTier::kDisk);
  EXPECT_TRUE(hit.state == sa);
  hit = store->Lookup(ka, a);  // loaded back into memory (b spilled in turn)
  EXPECT_EQ(hit.tier, CacheTier::kMemory);
  EXPECT_TRUE(hit.state == sa);
  EXPECT_EQ(store->stats().hit_tokens_disk, 128u);
  hit = store->Lookup(kb, b);
  EXPECT_EQ(hit.tier, CacheTier::kDisk);
  EXPECT_TRUE(hit.state == sb);
}

// Events as "kind key tier" strings, sorted (one call's events come in no promised order).
std::vector<std::string> Described(const std::vector<CacheEvent>& events,
                                   const std::map<BlockKey, std::string>& names) {
  std::vector<std::string> out;
  for (const CacheEvent& e : events) {
    EXPECT_TRUE(e.worker.empty());
    switch (e.kind) {
      case CacheEvent::Kind::kStored:
        out.push_back("stored " + names.at(e.key) + (e.disk_only ? " disk" : " memory"));
        break;
      case CacheEvent::Kind::kEvicted:
        out.push_back("evicted " + names.at(e.key));
        break;
      case CacheEvent::Kind::kExpired:
        out.push_back("expired " + names.at(e.key));
        break;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(SnapshotDiskTest, ChangesFollowStoresSpillsEvictionsAndExpiries) {
  using Events = std::vector<std::string>;
  auto store = OpenStore(OneSnapshotBytes(), int64_t{1} << 30);
  const auto a = testing::RandomTokens(128, 96, 2), b = testing::RandomTokens(128, 96, 3);
  const auto ka = PrefixBlockKeys(kFingerprint, "", a), kb = PrefixBlockKeys(kFingerprint, "", b);
  const std::map<BlockKey, std::string> names = {{ka[0], "a"}, {kb[0], "b"}};
  SnapshotChanges changes(*store, [this] { return now_; });
  EXPECT_TRUE(changes.Next().empty());

  SnapshotRetention ttl;
  ttl.ttl = absl::Seconds(10);
  ASSERT_TRUE(store->Insert(ka, a, State(128, 2), ttl).ok());
  EXPECT_EQ(Described(changes.Next(), names), Events({"stored a memory"}));
  EXPECT_TRUE(changes.Next().empty());                        // nothing changed
  ASSERT_TRUE(store->Insert(kb, b, State(128, 3), {}).ok());  // a goes to disk
  EXPECT_EQ(Described(changes.Next(), names), Events({"stored a disk", "stored b memory"}));

  // A watcher that comes late starts from the placement as it is.
  SnapshotChanges late(*store, [this] { return now_; });
  EXPECT_EQ(Described(late.Next(), names), Events({"stored a disk", "stored b memory"}));

  ASSERT_TRUE(store->Evict(kb[0]));
  EXPECT_EQ(Described(changes.Next(), names), Events({"evicted b"}));
  // Nothing touches the store when a's TTL passes: the watcher still sees it go, and why.
  now_ += absl::Seconds(11);
  EXPECT_EQ(Described(changes.Next(), names), Events({"expired a"}));
  EXPECT_EQ(Described(late.Next(), names), Events({"evicted b", "expired a"}));
  EXPECT_TRUE(changes.Next().empty());
}

TEST_F(SnapshotDiskTest, WhatMemoryCannotTakeGoesToDiskOnly) {
  auto store = OpenStore(OneSnapshotBytes(), int64_t{1} << 30);
  const auto a = testing::RandomTokens(128, 96, 11), b = testing::RandomTokens(128, 96, 12);
  const auto ka = PrefixBlockKeys(kFingerprint, "", a), kb = PrefixBlockKeys(kFingerprint, "", b);
  SnapshotRetention pin;
  pin.pinned = true;
  ASSERT_TRUE(store->Insert(ka, a, State(128, 11), pin).ok());
  const SequenceState sb = State(128, 12);
  auto info = store->Insert(kb, b, sb, pin);  // memory is full of pinned snapshots
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->tier, CacheTier::kDisk);
  EXPECT_GT(info->bytes, 0);
  SnapshotHit hit = store->Lookup(kb, b);
  ASSERT_EQ(hit.tokens, 128);
  EXPECT_EQ(hit.tier, CacheTier::kDisk);
  EXPECT_TRUE(hit.state == sb);
}

TEST_F(SnapshotDiskTest, PrecachedSnapshotsSurviveARestart) {
  const auto doc = testing::RandomTokens(300, 96, 4);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  const SequenceState s = State(256, 4);
  SnapshotRetention pin;
  pin.pinned = true;
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    ASSERT_TRUE(store->Insert(keys, doc, s, pin).ok());
    ASSERT_TRUE(store->Insert(absl::MakeConstSpan(keys).subspan(0, 1), doc, State(128, 5), {})
                    .ok());  // not pre-cached: memory only
  }
  auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
  const std::vector<SnapshotInfo> listed = store->List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].key, keys[1]);
  EXPECT_EQ(listed[0].tier, CacheTier::kDisk);
  EXPECT_TRUE(listed[0].pinned);
  SnapshotHit hit = store->Lookup(keys, doc);
  ASSERT_EQ(hit.tokens, 256);
  EXPECT_EQ(hit.tier, CacheTier::kDisk);
  EXPECT_TRUE(hit.state == s);
}

// A tenant's ListCache / EvictCache (the salt's root key): its own snapshots in memory and on
// disk, also after a restart (the disk tier learns block 0 from the files), never another's.
TEST_F(SnapshotDiskTest, ListAndEvictSeeOnlyTheSaltsOwnSnapshots) {
  const auto doc = testing::RandomTokens(300, 96, 40);  // the same document for both tenants
  const auto a_keys = PrefixBlockKeys(kFingerprint, "tenant-a", doc);
  const auto b_keys = PrefixBlockKeys(kFingerprint, "tenant-b", doc);
  const BlockKey a = PrefixRootKey(kFingerprint, "tenant-a");
  const BlockKey b = PrefixRootKey(kFingerprint, "tenant-b");
  const BlockKey nobody = PrefixRootKey(kFingerprint, "");
  SnapshotRetention pin;
  pin.pinned = true;
  auto handles = [](const std::vector<SnapshotInfo>& infos) {
    std::set<BlockKey> out;
    for (const SnapshotInfo& i : infos) out.insert(i.key);
    return out;
  };
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    ASSERT_TRUE(store->Insert(a_keys, doc, State(256, 41), pin).ok());  // memory + disk
    ASSERT_TRUE(store->Insert(b_keys, doc, State(256, 42), pin).ok());
    ASSERT_TRUE(store->Insert(absl::MakeConstSpan(a_keys).subspan(0, 1), doc, State(128, 43), {})
                    .ok());  // memory only
    EXPECT_EQ(handles(store->List(a)), (std::set<BlockKey>{a_keys[0], a_keys[1]}));
    EXPECT_EQ(handles(store->List(b)), (std::set<BlockKey>{b_keys[1]}));
    EXPECT_TRUE(store->List(nobody).empty());
    EXPECT_EQ(store->List().size(), 3u);
    EXPECT_FALSE(store->Evict(a_keys[1], b));  // A's handle, B asking: not there
    EXPECT_EQ(store->Lookup(a_keys, doc).tokens, 256);
  }
  auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);  // both now on disk only
  EXPECT_EQ(handles(store->List(a)), (std::set<BlockKey>{a_keys[1]}));
  EXPECT_FALSE(store->Evict(a_keys[1], b));
  EXPECT_EQ(store->EvictAll(b), 1u);  // B's only
  EXPECT_EQ(handles(store->List()), (std::set<BlockKey>{a_keys[1]}));
  EXPECT_EQ(store->Lookup(a_keys, doc).tokens, 256);
  EXPECT_TRUE(store->Evict(a_keys[1], a));
  EXPECT_TRUE(store->List().empty());
}

TEST_F(SnapshotDiskTest, CorruptOrForeignFilesAreRefusedAndReported) {
  const auto doc = testing::RandomTokens(128, 96, 6), other = testing::RandomTokens(128, 96, 7);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  const auto other_keys = PrefixBlockKeys(kFingerprint, "", other);
  SnapshotRetention pin;
  pin.pinned = true;
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    ASSERT_TRUE(store->Insert(keys, doc, State(128, 6), pin).ok());
    ASSERT_TRUE(store->Insert(other_keys, other, State(128, 7), pin).ok());
  }
  FlipByte(FileOf(keys[0]), 100);
  std::vector<DiscardedSnapshot> discarded;
  auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30, kFingerprint, &discarded);
  ASSERT_EQ(discarded.size(), 1u);
  EXPECT_EQ(discarded[0].key, keys[0]);
  EXPECT_EQ(discarded[0].reason.code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(std::filesystem::exists(FileOf(keys[0])));
  SnapshotHit miss = store->Lookup(keys, doc);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kCorrupt);
  EXPECT_EQ(store->stats().discarded, 1u);

  // Damaged after start-up: refused when loaded (40 bytes from the end: before the CRC and tag).
  FlipByte(FileOf(other_keys[0]), 40);
  miss = store->Lookup(other_keys, other);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kCorrupt);
  EXPECT_FALSE(std::filesystem::exists(FileOf(other_keys[0])));
}

// Cache poisoning: whoever can write the cache volume changes a snapshot's state and recomputes
// every CRC (the file's and its bundle's). Under a cache key that file is refused, at start-up
// and when swapped in later, and the miss says why; so is a file made without the key.
TEST_F(SnapshotDiskTest, FilesChangedWithoutTheCacheKeyAreRefused) {
  cache_key_ = "cluster-cache-key-0123456789";
  const auto doc = testing::RandomTokens(128, 96, 24), other = testing::RandomTokens(128, 96, 25);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  const auto other_keys = PrefixBlockKeys(kFingerprint, "", other);
  SnapshotRetention pin;
  pin.pinned = true;
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    ASSERT_TRUE(store->Insert(keys, doc, State(128, 24), pin).ok());
    ASSERT_TRUE(store->Insert(other_keys, other, State(128, 25), pin).ok());
  }
  // The attacker's rewrite of a block's K rows: every checksum right, the tag under its guess.
  auto poison = [&](const BlockKey& name, const std::string& guess) {
    std::ifstream in(BlockFileOf(name), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto rows = ParseKvBlockFile(bytes, name, config_, kFingerprint, cache_key_);
    ASSERT_TRUE(rows.ok()) << rows.status();
    rows->k[0] ^= 1;
    std::ofstream(BlockFileOf(name), std::ios::binary | std::ios::trunc)
        << SerializeKvBlockFile(name, *rows, config_, kFingerprint, guess);
  };
  poison(keys[0], "");
  std::vector<DiscardedSnapshot> discarded;
  auto store = OpenStore(1, int64_t{1} << 30, kFingerprint, &discarded);
  ASSERT_EQ(discarded.size(), 1u);
  EXPECT_EQ(discarded[0].key, keys[0]);
  EXPECT_EQ(discarded[0].reason.code(), absl::StatusCode::kUnauthenticated) << discarded[0].reason;
  EXPECT_FALSE(std::filesystem::exists(FileOf(keys[0])));
  SnapshotHit miss = store->Lookup(keys, doc);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kUnauthenticated);

  poison(other_keys[0], "cluster-cache-key-012345678");  // one character short of the key
  miss = store->Lookup(other_keys, other);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kUnauthenticated);
  EXPECT_STREQ(CacheMissName(miss.miss), "unauthenticated");
  EXPECT_EQ(store->stats().discarded, 2u);
}

TEST_F(SnapshotDiskTest, AnotherModelsFilesAreNeverUsed) {
  const auto doc = testing::RandomTokens(128, 96, 8);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  SnapshotRetention pin;
  pin.pinned = true;
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    ASSERT_TRUE(store->Insert(keys, doc, State(128, 8), pin).ok());
  }
  std::vector<DiscardedSnapshot> discarded;
  auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30, kFingerprint + 1, &discarded);
  ASSERT_EQ(discarded.size(), 1u);
  EXPECT_EQ(discarded[0].reason.code(), absl::StatusCode::kFailedPrecondition);
  // (The other model would compute other keys; asking with these shows the recorded reason.)
  EXPECT_EQ(store->Lookup(keys, doc).miss, CacheMiss::kFingerprintMismatch);
}

TEST_F(SnapshotDiskTest, DiskBudgetEvictionAndTtl) {
  auto store = OpenStore(OneSnapshotBytes(), 2 * OneSnapshotBytes() + 2000);
  std::vector<std::vector<int32_t>> p;
  std::vector<std::vector<BlockKey>> k;
  for (uint32_t i = 0; i < 4; ++i) {
    p.push_back(testing::RandomTokens(128, 96, 30 + i));
    k.push_back(PrefixBlockKeys(kFingerprint, "", p.back()));
    ASSERT_TRUE(store->Insert(k[i], p[i], State(128, i), {}).ok());
  }
  // Memory holds one; 0, 1 and 2 spilled in turn and the disk has room for two: 0 is gone.
  EXPECT_EQ(store->stats().disk_snapshots, 2);
  EXPECT_FALSE(std::filesystem::exists(FileOf(k[0][0])));
  SnapshotHit miss = store->Lookup(k[0], p[0]);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kEvicted);
  EXPECT_EQ(store->Lookup(k[2], p[2]).tier, CacheTier::kDisk);

  EXPECT_TRUE(store->Evict(k[2][0]));  // in memory and on disk: both go
  EXPECT_FALSE(std::filesystem::exists(FileOf(k[2][0])));
  EXPECT_EQ(store->Lookup(k[2], p[2]).miss, CacheMiss::kEvicted);

  SnapshotRetention ttl;
  ttl.ttl = absl::Seconds(5);
  const auto doc = testing::RandomTokens(128, 96, 40);
  const auto dk = PrefixBlockKeys(kFingerprint, "", doc);
  ASSERT_TRUE(store->Insert(dk, doc, State(128, 40), ttl).ok());  // written through
  EXPECT_TRUE(std::filesystem::exists(FileOf(dk[0])));
  now_ += absl::Seconds(6);
  EXPECT_EQ(store->Lookup(dk, doc).miss, CacheMiss::kExpired);
  EXPECT_FALSE(std::filesystem::exists(FileOf(dk[0])));
}

// --- Hostile cache folders: each of these used to hang, abort or stop the worker. ---

TEST_F(SnapshotDiskTest, SpecialFilesNeverBlockOrAbortStartUpAndCountOnce) {
  const auto doc = testing::RandomTokens(128, 96, 20);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  SnapshotRetention pin;
  pin.pinned = true;
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    ASSERT_TRUE(store->Insert(keys, doc, State(128, 20), pin).ok());
  }
  const int64_t good_bytes = static_cast<int64_t>(std::filesystem::file_size(FileOf(keys[0])) +
                                                  std::filesystem::file_size(BlockFileOf(keys[0])));
  auto key_named = [](int i) {
    BlockKey k;
    k.bytes.fill(static_cast<uint8_t>(0x10 + i));
    return k;
  };
  ASSERT_EQ(mkfifo(FileOf(key_named(1)).c_str(), 0600), 0);
  std::filesystem::create_symlink("/dev/zero", FileOf(key_named(2)));
  std::filesystem::create_directory(FileOf(key_named(3)));
  std::filesystem::create_directory(FileOf(key_named(4)) + ".tmp");
  {  // 10 GiB, sparse: its header cannot vouch for it
    std::filesystem::copy_file(FileOf(keys[0]), FileOf(key_named(5)));
    std::filesystem::resize_file(FileOf(key_named(5)), uint64_t{10} << 30);
  }
  std::string upper = keys[0].Hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::filesystem::copy_file(FileOf(keys[0]), dir_ + "/" + upper + ".snap");

  std::vector<DiscardedSnapshot> discarded;
  auto disk =
      SnapshotDiskTier::Open({dir_, int64_t{1} << 30, ""}, config_, kFingerprint, &discarded);
  ASSERT_TRUE(disk.ok()) << disk.status();
  EXPECT_EQ((*disk)->size(), 1u);
  EXPECT_EQ((*disk)->bytes(), good_bytes);  // the upper-case copy is not ours
  std::set<BlockKey> refused;
  for (const DiscardedSnapshot& d : discarded) refused.insert(d.key);
  for (int i : {1, 2, 3, 5}) EXPECT_TRUE(refused.count(key_named(i))) << i;
  EXPECT_TRUE(std::filesystem::is_directory(FileOf(key_named(3))));  // not ours to delete
  EXPECT_FALSE(std::filesystem::exists(FileOf(key_named(5))));       // ours: deleted
  EXPECT_TRUE((*disk)->Load(keys[0]).ok());
}

TEST_F(SnapshotDiskTest, FilesSwappedAfterStartUpFailOnlyTheirLookup) {
  const auto doc = testing::RandomTokens(128, 96, 21), other = testing::RandomTokens(128, 96, 22);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  const auto other_keys = PrefixBlockKeys(kFingerprint, "", other);
  SnapshotRetention pin;
  pin.pinned = true;
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    ASSERT_TRUE(store->Insert(keys, doc, State(128, 21), pin).ok());
    ASSERT_TRUE(store->Insert(other_keys, other, State(128, 22), pin).ok());
  }
  auto store = OpenStore(1, int64_t{1} << 30);  // nothing fits memory: lookups read the disk
  std::filesystem::remove(FileOf(keys[0]));
  ASSERT_EQ(mkfifo(FileOf(keys[0]).c_str(), 0600), 0);
  std::filesystem::remove(FileOf(other_keys[0]));
  std::filesystem::create_symlink("/dev/zero", FileOf(other_keys[0]));
  const auto start = std::chrono::steady_clock::now();
  SnapshotHit miss = store->Lookup(keys, doc);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kCorrupt);
  miss = store->Lookup(other_keys, other);
  EXPECT_EQ(miss.tokens, 0);
  EXPECT_EQ(miss.miss, CacheMiss::kCorrupt);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(store->List().empty());  // forgotten, not retried on every request
}

// A write that fails (here: the file-size limit, as a full disk would) is reported to the
// caller, counted, and leaves no partial file; the snapshot still serves from memory.
TEST_F(SnapshotDiskTest, FailedDiskWritesAreReportedAndLeaveNothingBehind) {
  const auto doc = testing::RandomTokens(128, 96, 23);
  const auto keys = PrefixBlockKeys(kFingerprint, "", doc);
  auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
  SnapshotRetention pin;
  pin.pinned = true;
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing the process
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::StatusOr<SnapshotInfo> saved = store->Insert(keys, doc, State(128, 23), pin);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_FALSE(saved->disk_error.empty());
  EXPECT_EQ(store->stats().disk_write_failures, 1u);
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
  EXPECT_EQ(store->Lookup(keys, doc).tokens, 128);  // from memory
}

// A real full volume and a real read-only one (a 64 KiB tmpfs, then remounted read-only): the
// write fails, Precache is told why, nothing partial is left, the snapshot serves from memory,
// and a read-only volume with files on it still opens. Needs root to mount; skipped otherwise.
TEST_F(SnapshotDiskTest, FullAndReadOnlyVolumes) {
  std::filesystem::create_directories(dir_);
  if (geteuid() != 0 ||
      std::system(("mount -t tmpfs -o size=64k yoco-test " + dir_ + " 2> /dev/null").c_str()) !=
          0) {
    GTEST_SKIP() << "needs root to mount a small tmpfs";
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { std::system(("umount " + dir + " 2> /dev/null").c_str()); }
  } unmount{dir_};
  SnapshotRetention pin;
  pin.pinned = true;
  const auto small = testing::RandomTokens(128, 96, 26);  // its file does not fit in 64 KiB
  const auto small_keys = PrefixBlockKeys(kFingerprint, "", small);
  {
    auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30);
    absl::StatusOr<SnapshotInfo> saved = store->Insert(small_keys, small, State(128, 26), pin);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_NE(saved->disk_error.find("No space"), std::string::npos) << saved->disk_error;
    EXPECT_EQ(store->stats().disk_write_failures, 1u);
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      ADD_FAILURE() << "left behind: " << entry.path();
    }
    EXPECT_EQ(store->Lookup(small_keys, small).tokens, 128);  // from memory
  }
  // Read-only, with a file on it (put there before the remount).
  std::ofstream(dir_ + "/" + std::string(32, 'a') + ".snap") << "not a snapshot";
  ASSERT_EQ(std::system(("mount -o remount,ro " + dir_).c_str()), 0);
  std::vector<DiscardedSnapshot> discarded;
  auto store = OpenStore(int64_t{1} << 30, int64_t{1} << 30, kFingerprint, &discarded);
  EXPECT_EQ(discarded.size(), 1u);  // refused, though it cannot be deleted
  absl::StatusOr<SnapshotInfo> saved = store->Insert(small_keys, small, State(128, 26), pin);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_NE(saved->disk_error.find("Read-only"), std::string::npos) << saved->disk_error;
  EXPECT_EQ(store->Lookup(small_keys, small).tokens, 128);
}

}  // namespace
}  // namespace yoco
