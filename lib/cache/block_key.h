// Prefix-cache keys. A prompt is cut into blocks of kCacheBlockTokens tokens; block i's key
// chains block i-1's key with the block's tokens, so one key names a whole prefix:
//
//   key[-1] = SHA-256("yoco-prefix-v1" || u64 model_fingerprint || u32 len(salt) || salt)[0:16]
//   key[i]  = SHA-256(key[i-1] || i32 tokens[i*B .. (i+1)*B))[0:16]      (little-endian)
//
// The fingerprint (weights + params) and the per-tenant salt seed the chain, so two models or
// tenants never share an entry. 128 bits make an accidental collision negligible; stored
// snapshots also keep their tokens and are checked on use.
//
// Why 128-token blocks: prefill runs on a grid of the same size (PrefillOptions::grid), since
// only a snapshot at a grid boundary resumes bit-exactly. Measured on the 12-layer dim-768
// shape (2 threads): prefilling 2048 tokens in 128-token segments runs as fast as one segment
// (1283 vs 1262-1344 tok/s), 64-token segments cost 15% (1093 tok/s). A hit recomputes at most
// 127 tokens of the cached text.
#ifndef YOCO_LIB_CACHE_BLOCK_KEY_H_
#define YOCO_LIB_CACHE_BLOCK_KEY_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/engine/kv_rows.h"

namespace yoco {

inline constexpr int64_t kCacheBlockTokens = 128;
// A block's K/V rows are one KvRows chunk: snapshots and hits share them instead of copying, and
// a block's key names its chunk across workers (ResidentKv).
static_assert(kCacheBlockTokens == KvRows::kChunkRows);

struct BlockKey {
  std::array<uint8_t, 16> bytes{};

  std::string Hex() const;
  static absl::StatusOr<BlockKey> FromHex(absl::string_view hex);

  auto operator<=>(const BlockKey&) const = default;
  bool operator==(const BlockKey&) const = default;
};

// key[-1]: what a salt's chains start from. A snapshot whose block 0 chains from a salt's root
// was made under that salt, which is how a worker tells a tenant's snapshots from another's
// without storing the salt.
BlockKey PrefixRootKey(uint64_t model_fingerprint, absl::string_view salt);
// key[i] from key[i-1] and block i's kCacheBlockTokens tokens.
BlockKey NextBlockKey(const BlockKey& previous, absl::Span<const int32_t> block);

// The keys of every full block of `tokens` (tokens.size() / kCacheBlockTokens of them).
std::vector<BlockKey> PrefixBlockKeys(uint64_t model_fingerprint, absl::string_view salt,
                                      absl::Span<const int32_t> tokens);

}  // namespace yoco

#endif  // YOCO_LIB_CACHE_BLOCK_KEY_H_
