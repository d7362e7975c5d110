// Bundle part encoding. As with state bundles, the checksum is verified before any field is
// trusted, and the rows are checksummed a slice at a time behind their copy (or, for a part
// that landed in its chunks, read once for the checksum alone).
#include "lib/engine/bundle_part.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/decode_attention.h"
#include "lib/checksum/crc32c.h"
#include "lib/engine/checksummed_rows.h"
#include "lib/engine/kv_chunk_arena.h"

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'P', 'A', 'R', 'T'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kRowsVersion = 1;  // rows, not chunks

#pragma pack(push, 1)
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint64_t model_fingerprint;
  uint64_t parts_id;
  uint32_t index;
  uint32_t kv_dtype;
  uint32_t kv_dim;
  uint32_t storage;  // StorageTag() in version 2, 0 in version 1
  uint64_t row0;
  uint64_t rows;
};
#pragma pack(pop)
static_assert(sizeof(Header) == 64);

constexpr uint64_t kMaxRows = uint64_t{1} << 40;

// The chunks' layouts and the shapes of their blocks: what a receiver must share with the
// sender to take chunks as they are stored.
constexpr uint32_t StorageTag(KvLayout k, KvLayout v) {
  static_assert(cpu::kKeyLaneRows < 256 && cpu::kValueStripRows < 256 &&
                cpu::kValueStripWidth < 256);
  return static_cast<uint32_t>(k) | static_cast<uint32_t>(v) << 4 |
         static_cast<uint32_t>(cpu::kKeyLaneRows) << 8 |
         static_cast<uint32_t>(cpu::kValueStripRows) << 16 |
         static_cast<uint32_t>(cpu::kValueStripWidth) << 24;
}

// How this build stores a shared K and V (KvRows::SharedKeys, SharedValues).
constexpr uint32_t kSharedStorage = StorageTag(KvLayout::kKeyLanes, KvLayout::kValueStrips);

uint64_t PartBytes(const ModelConfig& config, uint64_t rows) {
  return sizeof(Header) + 2 * rows * config.kv_dim() * KvDtypeBytes(config.kv_dtype) + 4;
}

// The fields a forger could set, checked once the checksum matched.
absl::Status CheckFields(const Header& h, size_t size, const ModelConfig& config,
                         uint64_t fingerprint) {
  const uint64_t C = KvRows::kChunkRows;
  const bool as_rows = h.version == kRowsVersion;
  const bool fits = h.rows <= kMaxRows && size == PartBytes(config, h.rows);
  if (h.flags != 0) return absl::InvalidArgumentError("bundle part: unknown flags");
  if (h.model_fingerprint != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat("bundle part: made by model ",
                                                      absl::Hex(h.model_fingerprint),
                                                      ", this is model ", absl::Hex(fingerprint)));
  }
  if (h.kv_dtype != static_cast<uint32_t>(config.kv_dtype) ||
      h.kv_dim != static_cast<uint32_t>(config.kv_dim())) {
    return absl::InvalidArgumentError(
        "bundle part: K/V dtype or width does not match this model (--kv-dtype must match)");
  }
  if (!as_rows && h.storage != kSharedStorage) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bundle part: K/V chunks stored as ", absl::Hex(h.storage), ", this build stores ",
        absl::Hex(kSharedStorage), " (a build of another version)"));
  }
  if (!fits || h.rows == 0 || h.rows % C != 0 || h.row0 % C != 0 || h.row0 > kMaxRows ||
      h.index > (1u << 30) || (as_rows && h.storage != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("bundle part: ", h.rows, " rows from row ",
                                                   h.row0, " in ", size, " bytes (whole chunks of ",
                                                   C, " rows)"));
  }
  return absl::OkStatus();
}

// The fields that say which part of which bundle it is, from a checked header.
void NamePart(const Header& h, BundlePart* part) {
  part->parts_id = h.parts_id;
  part->index = static_cast<int32_t>(h.index);
  part->row0 = static_cast<int64_t>(h.row0);
}

}  // namespace

bool IsBundlePart(absl::string_view bytes) {
  return bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0;
}

size_t BundlePartBytes(const ModelConfig& config, int64_t rows) {
  return PartBytes(config, static_cast<uint64_t>(rows));
}

void SerializeBundlePartTo(const ModelConfig& config, uint64_t fingerprint, uint64_t parts_id,
                           int32_t index, const SequenceState& state, int64_t row0, int64_t rows,
                           uint8_t* out) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.model_fingerprint = fingerprint;
  h.parts_id = parts_id;
  h.index = static_cast<uint32_t>(index);
  h.kv_dtype = static_cast<uint32_t>(config.kv_dtype);
  h.kv_dim = static_cast<uint32_t>(config.kv_dim());
  h.storage = StorageTag(state.shared_k.layout(), state.shared_v.layout());
  h.row0 = static_cast<uint64_t>(row0);
  h.rows = static_cast<uint64_t>(rows);
  std::memcpy(out, &h, sizeof h);
  uint32_t crc = Crc32c(out, sizeof h);
  uint8_t* p = out + sizeof h;
  const int64_t C = KvRows::kChunkRows;
  for (const KvRows* kv : {&state.shared_k, &state.shared_v}) {
    CopyChunksOut(*kv, row0 / C, rows / C, p, &crc);
    p += rows * kv->width() * KvDtypeBytes(kv->dtype());
  }
  std::memcpy(p, &crc, 4);
}

absl::StatusOr<BundlePart> ParseBundlePart(absl::string_view bytes, const ModelConfig& config,
                                           uint64_t fingerprint) {
  if (bytes.size() < sizeof(Header) + 4) {
    return absl::DataLossError(
        absl::StrCat("bundle part: ", bytes.size(), " bytes is too short (truncated)"));
  }
  if (!IsBundlePart(bytes)) return absl::InvalidArgumentError("bundle part: bad magic");
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.version != kVersion && h.version != kRowsVersion) {
    return absl::FailedPreconditionError(absl::StrCat("bundle part: version ", h.version,
                                                      " is not supported (this build reads ",
                                                      kRowsVersion, " and ", kVersion, ")"));
  }
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  // Rows are copied out with the CRC behind them when the size fits (and chunks, when they are
  // whole and stored as here); otherwise the CRC is taken over the whole first, so that a
  // flipped byte reads as corruption, not as a field error.
  const uint64_t C = KvRows::kChunkRows;
  const bool as_rows = h.version == kRowsVersion;
  BundlePart part;
  const bool fits = h.rows <= kMaxRows && bytes.size() == PartBytes(config, h.rows);
  const bool readable = as_rows || (h.rows % C == 0 && h.storage == kSharedStorage);
  uint32_t crc;
  if (fits && readable) {
    crc = Crc32c(bytes.data(), sizeof h);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + sizeof h;
    part.k = KvRows::SharedKeys(config.kv_dtype, config.kv_dim());
    part.v = KvRows::SharedValues(config.kv_dtype, config.kv_dim());
    for (KvRows* kv : {&part.k, &part.v}) {
      if (as_rows) {
        kv->Reserve(static_cast<int64_t>(h.rows));
        AppendRowsIn(p, static_cast<int64_t>(h.rows), kv, &crc);
      } else {
        AppendChunksIn(p, static_cast<int64_t>(h.rows / C), kv, &crc);
      }
      p += kv->bytes();
    }
  } else {
    crc = Crc32c(bytes.data(), bytes.size() - 4);
  }
  if (crc != stored) {
    return absl::DataLossError("bundle part: checksum mismatch (corrupt or truncated)");
  }
  if (absl::Status st = CheckFields(h, bytes.size(), config, fingerprint); !st.ok()) return st;
  NamePart(h, &part);
  return part;
}

std::unique_ptr<BundlePartLanding> BundlePartLanding::ForSize(const ModelConfig& config,
                                                              size_t bytes) {
  const uint64_t row_bytes = 2 * config.kv_dim() * KvDtypeBytes(config.kv_dtype);
  const uint64_t C = KvRows::kChunkRows;
  if (row_bytes == 0 || bytes < PartBytes(config, C)) return nullptr;
  const uint64_t rows = (bytes - PartBytes(config, 0)) / row_bytes;
  if (rows > kMaxRows || rows % C != 0 || PartBytes(config, rows) != bytes) return nullptr;
  std::unique_ptr<BundlePartLanding> landing(new BundlePartLanding());
  landing->bytes_ = bytes;
  landing->rows_ = static_cast<int64_t>(rows);
  landing->chunk_bytes_ = KvRows::ChunkBytes(config.kv_dtype, config.kv_dim());
  for (auto* chunks : {&landing->k_chunks_, &landing->v_chunks_}) {
    for (uint64_t i = 0; i < rows / C; ++i) {
      chunks->push_back(KvChunkArena::Global().AllocateUninitialized(landing->chunk_bytes_));
    }
  }
  return landing;
}

std::vector<absl::Span<uint8_t>> BundlePartLanding::segments() {
  std::vector<absl::Span<uint8_t>> out{{header_, sizeof header_}};
  for (auto* chunks : {&k_chunks_, &v_chunks_}) {
    for (const auto& chunk : *chunks) out.emplace_back(chunk.get(), chunk_bytes_);
  }
  out.emplace_back(checksum_, sizeof checksum_);
  return out;
}

bool BundlePartLanding::HoldsChunkPart() const {
  static_assert(sizeof(Header) == sizeof header_);
  Header h;
  std::memcpy(&h, header_, sizeof h);
  return std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.version == kVersion &&
         h.storage == kSharedStorage && h.rows == static_cast<uint64_t>(rows_);
}

std::string BundlePartLanding::Gather() const {
  std::string out(reinterpret_cast<const char*>(header_), sizeof header_);
  out.reserve(bytes_);
  for (auto* chunks : {&k_chunks_, &v_chunks_}) {
    for (const auto& chunk : *chunks) {
      out.append(reinterpret_cast<const char*>(chunk.get()), chunk_bytes_);
    }
  }
  out.append(reinterpret_cast<const char*>(checksum_), sizeof checksum_);
  return out;
}

absl::StatusOr<BundlePart> BundlePartLanding::Take(const ModelConfig& config,
                                                   uint64_t fingerprint) const {
  Header h;
  std::memcpy(&h, header_, sizeof h);
  uint32_t crc = Crc32c(header_, sizeof header_);
  for (auto* chunks : {&k_chunks_, &v_chunks_}) {
    for (const auto& chunk : *chunks) crc = Crc32cExtend(crc, chunk.get(), chunk_bytes_);
  }
  uint32_t stored;
  std::memcpy(&stored, checksum_, sizeof stored);
  if (crc != stored) {
    return absl::DataLossError("bundle part: checksum mismatch (corrupt or truncated)");
  }
  if (absl::Status st = CheckFields(h, bytes_, config, fingerprint); !st.ok()) return st;
  BundlePart part;
  NamePart(h, &part);
  part.k = KvRows::SharedKeys(config.kv_dtype, config.kv_dim());
  part.v = KvRows::SharedValues(config.kv_dtype, config.kv_dim());
  for (const auto& chunk : k_chunks_) part.k.AppendChunk(chunk);
  for (const auto& chunk : v_chunks_) part.v.AppendChunk(chunk);
  return part;
}

}  // namespace yoco
