// StateBundle: a sequence's whole decoding state after prefill (or at any later point), as
// shipped from prefill to decode workers and stored as snapshots. Restoring it and continuing
// gives exactly the tokens of an uninterrupted run.
//
// Serialised form (little-endian), version 1:
//   "YOCOBNDL"  u32 version  u32 flags(0)  u64 model_fingerprint
//   u32 n_self_layers  u64 self_state_floats  u32 kv_dim
//   u32 kv_dtype (0 = f32, 1 = bf16)  u64 position  i32 pending_token
//   f32 temperature  i32 top_k  f32 top_p  u64 seed  u32 n_stop  i32 stop[n_stop]
//   kv_dtype shared_k[position * kv_dim]  kv_dtype shared_v[position * kv_dim]
//   f32 self_state[n_self_layers][self_state_floats]
//   u32 crc32c of every byte before it
// Version 2 (a bundle with named chunks) adds, after the stop ids,
//   u32 n_names  u32 resident_chunks  u8 names[n_names][16]
// and carries only the K/V rows from resident_chunks · KvRows::kChunkRows on. Version 3 (a
// bundle whose next rows came ahead of it in parts, lib/engine/bundle_part.h) has the names
// section even with no names, then
//   u64 parts_id  u32 parts  u32 0  u64 part_rows
// and carries only the rows after those. Bundles without names or parts are written as version
// 1, which every reader reads (snapshot files embed them); with names only as version 2.
#ifndef YOCO_LIB_ENGINE_STATE_BUNDLE_H_
#define YOCO_LIB_ENGINE_STATE_BUNDLE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/engine/sampler.h"
#include "lib/engine/sequence_state.h"
#include "lib/model/model_config.h"

namespace yoco {

// What a full K/V chunk is known by across workers: the prefix cache's key of its block (which
// names the whole prefix, salted per tenant; lib/cache/block_key.h).
using ChunkName = std::array<uint8_t, 16>;

struct StateBundle {
  static constexpr uint32_t kVersion = 3;  // the newest this build reads and writes

  uint64_t model_fingerprint = 0;
  SequenceState state;
  int32_t pending_token = -1;  // sampled but not yet fed: the next decode step's input; -1: none
  SamplingParams sampling;
  // Names of the state's first full K/V chunks, in order; a decode worker keeps chunks under
  // them (ResidentKv) so that the next question on a document need not ship it again.
  std::vector<ChunkName> chunk_names;
  // Leading named chunks the serialised bundle leaves out: its receiver holds them. A parsed
  // bundle's shared_k and shared_v then hold only the rows from
  // resident_chunks · KvRows::kChunkRows on, until the receiver puts its chunks in front.
  int64_t resident_chunks = 0;
  // Rows after the resident chunks that were sent ahead in `parts` bundle parts under
  // `parts_id` (whole chunks, `part_rows` in all). A parsed bundle leaves them out of its rows
  // until the receiver puts the parts' rows in front (BundlePartStore::Join).
  uint64_t parts_id = 0;
  int32_t parts = 0;
  int64_t part_rows = 0;

  bool operator==(const StateBundle&) const = default;
};

std::string SerializeStateBundle(const StateBundle& bundle);
// The same into memory of the caller's (e.g. huge pages for a 1 GB bundle): `out` holds
// SerializedStateBundleBytes(bundle) bytes.
size_t SerializedStateBundleBytes(const StateBundle& bundle);
void SerializeStateBundleTo(const StateBundle& bundle, uint8_t* out);

// Parses and verifies a bundle for the model with `config` and `fingerprint`:
//   DATA_LOSS            truncated or checksum mismatch (corrupt),
//   INVALID_ARGUMENT     not a bundle, or shapes or a K/V dtype that do not fit `config`,
//   FAILED_PRECONDITION  made by another model (fingerprint) or an unsupported version.
// A bundle that leaves rows out (resident chunks, parts) parses to its carried rows only.
absl::StatusOr<StateBundle> ParseStateBundle(absl::string_view bytes, const ModelConfig& config,
                                             uint64_t fingerprint);

// The exact size SerializeStateBundle gives a bundle of this model at `position` with
// `stop_tokens` stop ids (and `names` chunk names, `resident` of them left out, `part_rows`
// rows sent ahead in parts), which lets a reader check a file's size before reading it.
uint64_t StateBundleBytes(const ModelConfig& config, uint64_t position, uint64_t stop_tokens,
                          uint64_t names = 0, uint64_t resident = 0, uint64_t part_rows = 0);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_STATE_BUNDLE_H_
