// Block file encoding; the checksum and tag are verified before any field is trusted.
#include "lib/cache/kv_block_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/cache/file_fields.h"
#include "lib/checksum/file_seal.h"
#include "lib/engine/kv_rows.h"

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'K', 'V', 'B', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 16 + 4 * kCacheBlockTokens + 4 + 4 + 8;

uint64_t RowsBytes(const ModelConfig& config) {
  return static_cast<uint64_t>(kCacheBlockTokens) * config.kv_dim() * KvDtypeBytes(config.kv_dtype);
}

}  // namespace

KvBlockRows KvBlockRowsOf(absl::Span<const int32_t> tokens, const KvRows& k, const KvRows& v,
                          int64_t row0) {
  KvBlockRows out;
  out.tokens.assign(tokens.begin() + row0, tokens.begin() + row0 + kCacheBlockTokens);
  const int64_t bytes = kCacheBlockTokens * k.width() * KvDtypeBytes(k.dtype());
  out.k.resize(bytes);
  out.v.resize(bytes);
  k.CopyRowBytes(row0, kCacheBlockTokens, reinterpret_cast<uint8_t*>(out.k.data()));
  v.CopyRowBytes(row0, kCacheBlockTokens, reinterpret_cast<uint8_t*>(out.v.data()));
  return out;
}

uint64_t KvBlockFileBytes(const ModelConfig& config) {
  return kHeaderBytes + 2 * RowsBytes(config) + kFileSealBytes;
}

std::string SerializeKvBlockFile(const BlockKey& key, const KvBlockRows& rows,
                                 const ModelConfig& config, uint64_t model_fingerprint,
                                 absl::string_view cache_key) {
  std::string out(kMagic, sizeof kMagic);
  out.reserve(KvBlockFileBytes(config));
  PutField<uint32_t>(&out, kVersion);
  PutField<uint64_t>(&out, model_fingerprint);
  out.append(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
  out.append(reinterpret_cast<const char*>(rows.tokens.data()), kCacheBlockTokens * 4);
  PutField<uint32_t>(&out, static_cast<uint32_t>(config.kv_dtype));
  PutField<uint32_t>(&out, static_cast<uint32_t>(kCacheBlockTokens));
  PutField<uint64_t>(&out, static_cast<uint64_t>(config.kv_dim()));
  out += rows.k;
  out += rows.v;
  AppendFileSeal(cache_key, &out);
  return out;
}

absl::StatusOr<KvBlockRows> ParseKvBlockFile(absl::string_view bytes, const BlockKey& key,
                                             const ModelConfig& config, uint64_t model_fingerprint,
                                             absl::string_view cache_key) {
  if (bytes.size() != KvBlockFileBytes(config) || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::DataLossError("not a K/V block file of this model's size, or truncated");
  }
  if (absl::Status st = CheckFileSeal(bytes, cache_key, "K/V block file"); !st.ok()) return st;
  size_t pos = 8;
  if (GetField<uint32_t>(bytes, &pos) != kVersion) {
    return absl::FailedPreconditionError("K/V block file version is not supported");
  }
  if (GetField<uint64_t>(bytes, &pos) != model_fingerprint) {
    return absl::FailedPreconditionError("K/V block file of another model");
  }
  BlockKey stored;
  std::memcpy(stored.bytes.data(), bytes.data() + pos, stored.bytes.size());
  pos += stored.bytes.size();
  if (stored != key) return absl::DataLossError("the K/V block file holds another block");
  KvBlockRows out;
  out.tokens.resize(kCacheBlockTokens);
  std::memcpy(out.tokens.data(), bytes.data() + pos, kCacheBlockTokens * 4);
  pos += kCacheBlockTokens * 4;
  const uint32_t dtype = GetField<uint32_t>(bytes, &pos);
  const uint32_t rows = GetField<uint32_t>(bytes, &pos);
  const uint64_t width = GetField<uint64_t>(bytes, &pos);
  if (dtype != static_cast<uint32_t>(config.kv_dtype) || rows != kCacheBlockTokens ||
      width != static_cast<uint64_t>(config.kv_dim())) {
    return absl::FailedPreconditionError("K/V block file of another K/V dtype or shape");
  }
  const uint64_t n = RowsBytes(config);
  out.k.assign(bytes.data() + pos, n);
  out.v.assign(bytes.data() + pos + n, n);
  return out;
}

}  // namespace yoco
