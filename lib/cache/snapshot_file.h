// SnapshotFile: the on-disk form of one prefix-cache snapshot, self-contained (it repeats the
// K/V rows it shares with other snapshots in memory) so that any file can be checked, loaded or
// deleted on its own.
//
// Layout (little-endian), version 2:
//   "YOCOSNAP"  u32 version  u32 flags (bit 0: pinned)  i64 expires_unix_ms (0: never)
//   u32 n_blocks  u8 keys[n_blocks][16]  i32 tokens[n_blocks * kCacheBlockTokens]
//   u64 bundle_bytes  StateBundle at position n_blocks * kCacheBlockTokens (its own
//   fingerprint, shapes and CRC-32C; no pending token)
//   u32 crc32c of every byte before it
//   u8 tag[32]: MessageTag of every byte before it under the cache key
// The CRC tells an accident (DATA_LOSS, "corrupt"); the tag tells a file that whoever can write
// the cache volume made or changed without the key (UNAUTHENTICATED): CRCs an attacker can
// recompute, so without the tag a changed file would be a disk hit that changes the answer.
#ifndef YOCO_LIB_CACHE_SNAPSHOT_FILE_H_
#define YOCO_LIB_CACHE_SNAPSHOT_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/cache/block_key.h"
#include "lib/engine/sequence_state.h"
#include "lib/model/model_config.h"

namespace yoco {

struct SnapshotFile {
  static constexpr uint32_t kVersion = 2;

  std::vector<BlockKey> chain;  // keys of blocks 0..n-1; chain.back() names the snapshot
  std::vector<int32_t> tokens;  // chain.size() * kCacheBlockTokens
  SequenceState state;          // at tokens.size()
  bool pinned = false;
  absl::Time expires = absl::InfiniteFuture();
};

// `cache_key`: the cluster's cache key (ReadKeyFile), or empty (the tag then only checks
// integrity).
std::string SerializeSnapshotFile(const SnapshotFile& file, uint64_t model_fingerprint,
                                  absl::string_view cache_key);

// DATA_LOSS: truncated, not a snapshot, or checksum mismatch; UNAUTHENTICATED: the tag is not
// this cache key's; FAILED_PRECONDITION: another model's (fingerprint) or an unsupported version;
// INVALID_ARGUMENT: shapes that do not fit.
absl::StatusOr<SnapshotFile> ParseSnapshotFile(absl::string_view bytes, const ModelConfig& config,
                                               uint64_t model_fingerprint,
                                               absl::string_view cache_key);

// The disk tier's form of a snapshot (version 3): the same header and chain as a SnapshotFile,
// the first block's tokens (a tenant's snapshots are told by them), then the self-decoder
// states alone. Its tokens and K/V rows live in the chain's block files (KvBlockFile), written
// once however many snapshots share them, so a document pre-cached with an intermediate
// snapshot every few blocks writes them once, and a manifest costs 16 bytes a block.
//
// Layout (little-endian), version 3:
//   "YOCOSNAP"  u32 version  u32 flags (bit 0: pinned)  i64 expires_unix_ms (0: never)
//   u32 n_blocks  u8 keys[n_blocks][16]  i32 first_block[kCacheBlockTokens]
//   u64 model_fingerprint  u32 n_self_layers  u64 floats_per_layer  f32 states[...]
//   u32 crc32c of every byte before it
//   u8 tag[32]: MessageTag of every byte before it under the cache key
struct SnapshotManifest {
  static constexpr uint32_t kVersion = 3;

  std::vector<BlockKey> chain;
  std::vector<int32_t> first_block;             // block 0's tokens (kCacheBlockTokens)
  std::vector<std::vector<float>> self_states;  // at chain.size() * kCacheBlockTokens
  bool pinned = false;
  absl::Time expires = absl::InfiniteFuture();
};

std::string SerializeSnapshotManifest(const SnapshotManifest& manifest, uint64_t model_fingerprint,
                                      absl::string_view cache_key);

// Errors as ParseSnapshotFile's.
absl::StatusOr<SnapshotManifest> ParseSnapshotManifest(absl::string_view bytes,
                                                       const ModelConfig& config,
                                                       uint64_t model_fingerprint,
                                                       absl::string_view cache_key);

// Bytes at the start of a snapshot file that tell its version and size (SnapshotFileBytes).
inline constexpr size_t kSnapshotFileHeaderBytes = 8 + 4 + 4 + 8 + 4;

// The size a snapshot file of this model must have, from its first kSnapshotFileHeaderBytes;
// DATA_LOSS when they are not a snapshot file's header, FAILED_PRECONDITION for a version other
// than SnapshotFile's (2) and SnapshotManifest's (3).
absl::StatusOr<uint64_t> SnapshotFileBytes(absl::string_view header, const ModelConfig& config);

// The version a snapshot file's header names (after SnapshotFileBytes accepted it).
uint32_t SnapshotFileVersion(absl::string_view header);

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_SNAPSHOT_FILE_H_
