// SnapshotDiskTier: prefix-cache snapshots on disk in one folder, bounded by a byte budget
// (least recently used unpinned snapshots go first). A snapshot is a manifest, DIR/<handle>.snap
// (SnapshotManifest: chain, tokens, self-decoder states), and its K/V rows are block files,
// DIR/<block key>.kvb (KvBlockFile), each written once and shared by every snapshot whose chain
// holds it: pre-caching a document writes its rows once however many intermediate snapshots it
// leaves, and the budget counts each block once. A block goes when no snapshot refers to it.
// Opening the folder registers what a previous run left there (converting version-2 snapshot
// files, which held their rows themselves); every file is verified then and again when loaded,
// and a corrupt file, one made by another model, or one not made with the cache key is deleted
// and reported, never used, as is a manifest whose blocks are not all there. The folder belongs
// to one model. Not thread-safe: SnapshotStore calls it under its lock.
#ifndef YOCO_LIB_CACHE_SNAPSHOT_DISK_TIER_H_
#define YOCO_LIB_CACHE_SNAPSHOT_DISK_TIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/cache/block_key.h"
#include "lib/cache/kv_block_file.h"
#include "lib/cache/snapshot_file.h"
#include "lib/model/model_config.h"

namespace yoco {

struct SnapshotDiskOptions {
  std::string dir;
  int64_t budget_bytes = int64_t{8} << 30;
  // Files are written with, and must carry, this key's tag (see SnapshotFile); empty: no key.
  std::string cache_key;
};

struct DiskSnapshotInfo {
  BlockKey key;
  int64_t tokens = 0;
  int64_t bytes = 0;  // its manifest and block files (blocks shared with others counted too)
  bool pinned = false;
  absl::Time expires = absl::InfiniteFuture();
  // Block 0's key and tokens: whether the snapshot was made under a salt (ChainsFrom).
  BlockKey first_key;
  std::vector<int32_t> first_block;
};

// A file found unusable: which snapshot, and why (DATA_LOSS: corrupt; UNAUTHENTICATED: not made
// with the cache key; FAILED_PRECONDITION: another model or version).
struct DiscardedSnapshot {
  BlockKey key;
  absl::Status reason;
};

class SnapshotDiskTier {
 public:
  // Creates the folder if needed and registers the valid snapshots in it; `discarded` receives
  // the files that were deleted.
  static absl::StatusOr<std::unique_ptr<SnapshotDiskTier>> Open(
      const SnapshotDiskOptions& options, const ModelConfig& config, uint64_t model_fingerprint,
      std::vector<DiscardedSnapshot>* discarded);

  // Chain block i's K and V rows, as KvRows::CopyRowBytes writes them: asked only for blocks
  // the folder does not hold yet.
  using BlockRows = std::function<KvBlockRows(size_t i)>;

  // Writes (or rewrites) a snapshot: the block files it lacks, then its manifest, first deleting
  // least recently used unpinned snapshots to stay within the budget (their keys are appended
  // to `evicted`, if given). RESOURCE_EXHAUSTED if it cannot fit next to the pinned ones; on
  // any failure nothing new is left behind. `durable`: on disk for good when it returns (else
  // a crash may lose it: its files then fail their checks at the next start).
  absl::StatusOr<DiskSnapshotInfo> Put(const SnapshotManifest& manifest, const BlockRows& rows,
                                       std::vector<BlockKey>* evicted = nullptr,
                                       bool durable = true);
  // The same for a self-contained snapshot (its rows come from file.state).
  absl::StatusOr<DiskSnapshotInfo> Put(const SnapshotFile& file,
                                       std::vector<BlockKey>* evicted = nullptr);
  // Reads and verifies a snapshot; a file that fails is deleted and its error returned.
  absl::StatusOr<SnapshotFile> Load(const BlockKey& key);
  bool Contains(const BlockKey& key) const { return entries_.count(key) > 0; }
  bool Remove(const BlockKey& key);
  size_t RemoveAll();
  // Deletes files whose expiry has passed; returns their keys.
  std::vector<BlockKey> Expire(absl::Time now);

  std::vector<DiskSnapshotInfo> List() const;
  size_t size() const { return entries_.size(); }
  int64_t bytes() const { return bytes_; }  // manifests + block files, each block once
  size_t blocks() const { return blocks_.size(); }

 private:
  struct Entry {
    DiskSnapshotInfo info;
    int64_t manifest_bytes = 0;
    std::vector<BlockKey> chain;
    uint64_t last_use = 0;
  };
  SnapshotDiskTier(SnapshotDiskOptions options, const ModelConfig& config, uint64_t fingerprint);
  std::string ManifestPath(const BlockKey& key) const;
  std::string BlockPath(const BlockKey& key) const;
  // Registers a snapshot whose manifest and blocks are on disk; takes a reference on each block.
  Entry& Register(const SnapshotManifest& manifest, int64_t manifest_bytes);
  // Deletes a snapshot's manifest and drops its references (a block no longer referred to goes).
  void Erase(std::map<BlockKey, Entry>::iterator it);
  void Unref(const BlockKey& block);
  // Opening: the blocks, then the manifests (converting version-2 files).
  void OpenBlock(const std::string& path, const BlockKey& key,
                 std::map<BlockKey, absl::Status>* bad_blocks);
  void OpenManifest(const std::string& path, const BlockKey& key,
                    const std::map<BlockKey, absl::Status>& bad_blocks,
                    std::vector<DiscardedSnapshot>* discarded);

  const SnapshotDiskOptions options_;
  const ModelConfig config_;
  const uint64_t fingerprint_;
  const int64_t block_bytes_;  // KvBlockFileBytes
  std::map<BlockKey, Entry> entries_;
  std::map<BlockKey, int> blocks_;  // block files on disk, and how many snapshots refer to each
  int64_t bytes_ = 0;
  uint64_t use_clock_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_SNAPSHOT_DISK_TIER_H_
