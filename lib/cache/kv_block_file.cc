// Block file encoding; the checksum and tag are verified before any field is trusted.
#include "lib/cache/kv_block_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/checksum/crc32c.h"
#include "lib/checksum/message_tag.h"
#include "lib/engine/kv_rows.h"

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'K', 'V', 'B', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 16 + 4 + 4 + 8;
constexpr size_t kTrailerBytes = 4 + kMessageTagBytes;

uint64_t RowsBytes(const ModelConfig& config) {
  return static_cast<uint64_t>(kCacheBlockTokens) * config.kv_dim() * KvDtypeBytes(config.kv_dtype);
}

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T Get(absl::string_view in, size_t* pos) {
  T v;
  std::memcpy(&v, in.data() + *pos, sizeof v);
  *pos += sizeof v;
  return v;
}

}  // namespace

uint64_t KvBlockFileBytes(const ModelConfig& config) {
  return kHeaderBytes + 2 * RowsBytes(config) + kTrailerBytes;
}

std::string SerializeKvBlockFile(const BlockKey& key, const KvBlockRows& rows,
                                 const ModelConfig& config, uint64_t model_fingerprint,
                                 absl::string_view cache_key) {
  std::string out(kMagic, sizeof kMagic);
  out.reserve(KvBlockFileBytes(config));
  Put<uint32_t>(&out, kVersion);
  Put<uint64_t>(&out, model_fingerprint);
  out.append(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
  Put<uint32_t>(&out, static_cast<uint32_t>(config.kv_dtype));
  Put<uint32_t>(&out, static_cast<uint32_t>(kCacheBlockTokens));
  Put<uint64_t>(&out, static_cast<uint64_t>(config.kv_dim()));
  out += rows.k;
  out += rows.v;
  Put<uint32_t>(&out, Crc32c(out.data(), out.size()));
  out += MessageTag(cache_key, out);
  return out;
}

absl::StatusOr<KvBlockRows> ParseKvBlockFile(absl::string_view bytes, const BlockKey& key,
                                             const ModelConfig& config, uint64_t model_fingerprint,
                                             absl::string_view cache_key) {
  if (bytes.size() != KvBlockFileBytes(config) || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::DataLossError("not a K/V block file of this model's size, or truncated");
  }
  const size_t crc_at = bytes.size() - kTrailerBytes;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + crc_at, 4);
  if (Crc32c(bytes.data(), crc_at) != stored_crc) {
    return absl::DataLossError("K/V block file checksum mismatch (corrupt or truncated)");
  }
  if (!MessageTagMatches(cache_key, bytes.substr(0, crc_at + 4), bytes.substr(crc_at + 4))) {
    return absl::UnauthenticatedError(
        cache_key.empty()
            ? "K/V block file was written under a cache key and this worker has none"
            : "K/V block file is not authenticated by this worker's cache key (changed or made "
              "without it)");
  }
  size_t pos = 8;
  if (Get<uint32_t>(bytes, &pos) != kVersion) {
    return absl::FailedPreconditionError("K/V block file version is not supported");
  }
  if (Get<uint64_t>(bytes, &pos) != model_fingerprint) {
    return absl::FailedPreconditionError("K/V block file of another model");
  }
  BlockKey stored;
  std::memcpy(stored.bytes.data(), bytes.data() + pos, stored.bytes.size());
  pos += stored.bytes.size();
  if (stored != key) return absl::DataLossError("the K/V block file holds another block");
  const uint32_t dtype = Get<uint32_t>(bytes, &pos);
  const uint32_t rows = Get<uint32_t>(bytes, &pos);
  const uint64_t width = Get<uint64_t>(bytes, &pos);
  if (dtype != static_cast<uint32_t>(config.kv_dtype) || rows != kCacheBlockTokens ||
      width != static_cast<uint64_t>(config.kv_dim())) {
    return absl::FailedPreconditionError("K/V block file of another K/V dtype or shape");
  }
  const uint64_t n = RowsBytes(config);
  KvBlockRows out;
  out.k.assign(bytes.data() + pos, n);
  out.v.assign(bytes.data() + pos + n, n);
  return out;
}

}  // namespace yoco
