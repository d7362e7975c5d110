// SnapshotDiskTier: prefix-cache snapshots as files in one folder (DIR/<handle>.snap), bounded
// by a byte budget (least recently used unpinned files go first). Opening the folder registers
// the snapshots a previous run left there; every file is verified then and again when loaded,
// and a corrupt file, one made by another model, or one not made with the cache key is deleted
// and reported, never used. The
// folder belongs to one model. Not thread-safe: SnapshotStore calls it under its lock.
#ifndef YOCO_LIB_CACHE_SNAPSHOT_DISK_TIER_H_
#define YOCO_LIB_CACHE_SNAPSHOT_DISK_TIER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/cache/block_key.h"
#include "lib/cache/snapshot_file.h"
#include "lib/engine/model_config.h"

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
  int64_t bytes = 0;  // the file's size
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

  // Writes (or rewrites) a snapshot, first deleting least recently used unpinned files to stay
  // within the budget (their keys are appended to `evicted`, if given). RESOURCE_EXHAUSTED if it
  // cannot fit next to the pinned ones (nothing written).
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
  int64_t bytes() const { return bytes_; }

 private:
  struct Entry {
    DiskSnapshotInfo info;
    uint64_t last_use = 0;
  };
  SnapshotDiskTier(SnapshotDiskOptions options, const ModelConfig& config, uint64_t fingerprint)
      : options_(std::move(options)), config_(config), fingerprint_(fingerprint) {}
  std::string PathOf(const BlockKey& key) const;
  void Erase(std::map<BlockKey, Entry>::iterator it);

  const SnapshotDiskOptions options_;
  const ModelConfig config_;
  const uint64_t fingerprint_;
  std::map<BlockKey, Entry> entries_;
  int64_t bytes_ = 0;
  uint64_t use_clock_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_SNAPSHOT_DISK_TIER_H_
