// KvBlockFile: one prefix-cache block's shared K and V rows (kCacheBlockTokens rows of each) on
// disk, the unit the disk tier stores once however many snapshots share it (a document's
// intermediate snapshots all begin with the same blocks). Named by the block's key, which the
// file repeats, so a file moved to another name is refused.
//
// Layout (little-endian), version 1:
//   "YOCOKVBK"  u32 version  u64 model_fingerprint  u8 key[16]  i32 tokens[kCacheBlockTokens]
//   u32 kv_dtype  u32 rows  u64 kv_dim  K rows  V rows   (rows × kv_dim values each, row-major,
//   in kv_dtype)
//   u32 crc32c of every byte before it
//   u8 tag[32]: MessageTag of every byte before it under the cache key
// As for snapshot files, the CRC tells an accident (DATA_LOSS) and the tag a change made without
// the cache key (UNAUTHENTICATED).
#ifndef YOCO_LIB_CACHE_KV_BLOCK_FILE_H_
#define YOCO_LIB_CACHE_KV_BLOCK_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/cache/block_key.h"
#include "lib/engine/kv_rows.h"
#include "lib/model/model_config.h"

namespace yoco {

// A block: its tokens, and its rows as KvRows::CopyRowBytes writes them.
struct KvBlockRows {
  std::vector<int32_t> tokens;  // kCacheBlockTokens
  std::string k, v;             // kCacheBlockTokens × kv_dim values of config.kv_dtype each
};

// Block `row0 / kCacheBlockTokens` of a sequence's shared K/V: its tokens (tokens[row0, row0 +
// kCacheBlockTokens)) and rows [row0, row0 + kCacheBlockTokens) of `k` and `v`.
KvBlockRows KvBlockRowsOf(absl::Span<const int32_t> tokens, const KvRows& k, const KvRows& v,
                          int64_t row0);

// The exact size of a block file of this model.
uint64_t KvBlockFileBytes(const ModelConfig& config);

// REQUIRES: rows holds a block of `config`'s shape.
std::string SerializeKvBlockFile(const BlockKey& key, const KvBlockRows& rows,
                                 const ModelConfig& config, uint64_t model_fingerprint,
                                 absl::string_view cache_key);

// DATA_LOSS: truncated, not a block file, checksum mismatch, or another key's block;
// UNAUTHENTICATED: the tag is not this cache key's; FAILED_PRECONDITION: another model's
// (fingerprint, K/V dtype or width) or an unsupported version.
absl::StatusOr<KvBlockRows> ParseKvBlockFile(absl::string_view bytes, const BlockKey& key,
                                             const ModelConfig& config, uint64_t model_fingerprint,
                                             absl::string_view cache_key);

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_KV_BLOCK_FILE_H_
