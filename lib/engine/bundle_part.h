// BundlePart: a run of whole K/V chunks of a state bundle, sent ahead of the bundle in a
// transfer of its own. A gigabyte bundle sent as parts keeps the sender serialising, the wire
// moving and the receiver parsing at the same time, where one transfer does each in turn; the
// bundle that follows names the parts (StateBundle::parts_id) and carries only the rest.
//
// Serialised form (little-endian), version 2:
//   "YOCOPART"  u32 version  u32 flags(0)  u64 model_fingerprint  u64 parts_id  u32 index
//   u32 kv_dtype  u32 kv_dim  u32 storage  u64 row0  u64 rows
//   K's chunks as stored  V's chunks as stored
//   u32 crc32c of every byte before it
// The chunks travel in their storage layouts (K in lanes, V in strips; `storage` names both and
// their block shapes), so each side copies whole chunks, where rows would be scattered into
// lanes value by value. Version 1 carried rows (kv_dtype k[rows * kv_dim], then v; storage 0);
// it is still read, so prefill workers of the version before can send to this one.
#ifndef YOCO_LIB_ENGINE_BUNDLE_PART_H_
#define YOCO_LIB_ENGINE_BUNDLE_PART_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/engine/kv_rows.h"
#include "lib/engine/sequence_state.h"
#include "lib/model/model_config.h"

namespace yoco {

// The part size prefill workers use unless told otherwise (--bundle-part-mb), which decode
// workers keep receive buffers for.
constexpr int64_t kDefaultBundlePartBytes = int64_t{64} << 20;

struct BundlePart {
  uint64_t parts_id = 0;  // the sender's name for the bundle the part belongs to
  int32_t index = 0;      // 0, 1, ... in row order
  int64_t row0 = 0;       // the sequence position of its first row (a chunk boundary)
  KvRows k, v;            // whole chunks
};

// Whether `bytes` start as a bundle part (and not, e.g., as a state bundle).
bool IsBundlePart(absl::string_view bytes);

size_t BundlePartBytes(const ModelConfig& config, int64_t rows);

// Writes rows [row0, row0 + rows) of `state`'s shared K/V as part `index` of `parts_id` into
// `out` (BundlePartBytes(config, rows) bytes). REQUIRES: row0 and rows multiples of
// KvRows::kChunkRows, the rows within the state.
void SerializeBundlePartTo(const ModelConfig& config, uint64_t fingerprint, uint64_t parts_id,
                           int32_t index, const SequenceState& state, int64_t row0, int64_t rows,
                           uint8_t* out);

// Parses and verifies a part for the model with `config` and `fingerprint`, with the same codes
// as ParseStateBundle: DATA_LOSS (corrupt, truncated), INVALID_ARGUMENT (not a part, shapes),
// FAILED_PRECONDITION (another model, an unsupported version).
absl::StatusOr<BundlePart> ParseBundlePart(absl::string_view bytes, const ModelConfig& config,
                                           uint64_t fingerprint);

// Memory an incoming part is received into, laid out as the K/V chunks it becomes: the
// transport writes each row where it stays and the receiver only checks the checksum, where it
// used to copy every byte (a 1M-token document is a gigabyte of them) from a receive buffer into
// chunks. A part's size alone gives its rows (a part is whole chunks of one model's rows), so
// the layout is known before the data. What lands in one but is not a part this build takes as
// it is (a state bundle of the same size, a version-1 part, a corrupt header) is gathered into
// one buffer and read by ParseBundlePart.
class BundlePartLanding {
 public:
  // Null when no part of whole chunks for `config` has `bytes` bytes.
  static std::unique_ptr<BundlePartLanding> ForSize(const ModelConfig& config, size_t bytes);

  // Where the bytes go, in order: the header, K's chunks, V's chunks, the checksum.
  std::vector<absl::Span<uint8_t>> segments();
  size_t bytes() const { return bytes_; }

  // Whether what landed reads as a part of this version and layout with the rows its size
  // says: Take() it; otherwise Gather() it for ParseBundlePart.
  bool HoldsChunkPart() const;
  std::string Gather() const;

  // ParseBundlePart for what landed (the same checks and codes), sharing the chunks instead of
  // copying them. REQUIRES: HoldsChunkPart().
  absl::StatusOr<BundlePart> Take(const ModelConfig& config, uint64_t fingerprint) const;

 private:
  BundlePartLanding() = default;

  size_t bytes_ = 0;
  int64_t rows_ = 0;
  uint8_t header_[64];
  uint8_t checksum_[4];
  // Taken uninitialised from the arena: every byte is written before anything reads it.
  std::vector<std::shared_ptr<uint8_t>> k_chunks_, v_chunks_;
  size_t chunk_bytes_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_BUNDLE_PART_H_
