// State bundle encoding. The checksum is verified before any field is trusted, so a flipped
// byte anywhere is reported as corruption rather than as a misleading field error. Both ways the
// K/V rows are checksummed a slice at a time right behind their copy, so a gigabyte bundle is
// read from memory once on each side.
#include "lib/engine/state_bundle.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/checksum/crc32c.h"
#include "lib/engine/checksummed_rows.h"

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'B', 'N', 'D', 'L'};
constexpr size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + 4 + 8 + 4 + 4 + 8 + 4 + 4 + 4 + 4 + 8 + 4;
constexpr uint32_t kMaxStopTokens = 1024;

// Writes into memory of the bundle's exact size, extending the CRC behind what it wrote.
class Writer {
 public:
  explicit Writer(uint8_t* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    PutBytes(&v, sizeof v);
  }
  void PutBytes(const void* p, size_t n) {
    if (n == 0) return;  // p may be null
    std::memcpy(out_ + pos_, p, n);
    pos_ += n;
  }
  void PutFloats(const std::vector<float>& v) {
    PutBytes(v.data(), v.size() * sizeof(float));
    Seal();
  }
  // Rows [row0, rows.rows()).
  void PutRows(const KvRows& rows, int64_t row0) {
    const int64_t n = rows.rows() - row0;
    if (n <= 0) return;
    Seal();
    CopyRowsOut(rows, row0, n, out_ + pos_, &crc_);
    pos_ += n * rows.width() * KvDtypeBytes(rows.dtype());
    sealed_ = pos_;
  }
  // The checksum of everything written, appended.
  void PutCrc() {
    Seal();
    Put<uint32_t>(crc_);
  }

 private:
  void Seal() {
    crc_ = Crc32cExtend(crc_, out_ + sealed_, pos_ - sealed_);
    sealed_ = pos_;
  }

  uint8_t* out_;
  size_t pos_ = 0;
  size_t sealed_ = 0;  // bytes the CRC covers
  uint32_t crc_ = 0;
};

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  template <typename T>
  T Get() {
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

 private:
  absl::string_view in_;
  size_t pos_ = 0;
};

// The counts that size a bundle, read where they are (after the stop ids, version 2 and 3).
struct Counts {
  uint32_t n_stop = 0;
  uint64_t position = 0;
  uint32_t n_names = 0;
  uint32_t resident = 0;
  uint64_t parts_id = 0;
  uint32_t parts = 0;
  uint64_t part_rows = 0;
  size_t rows_at = 0;  // where the K rows start
};

// The counts, or the reason they cannot size a bundle. REQUIRES: bytes hold the fixed header.
absl::StatusOr<Counts> ReadCounts(absl::string_view bytes, uint32_t version) {
  constexpr size_t kPositionAt = 8 + 4 + 4 + 8 + 4 + 8 + 4 + 4;
  Counts c;
  std::memcpy(&c.n_stop, bytes.data() + kFixedHeaderBytes - 4, 4);
  std::memcpy(&c.position, bytes.data() + kPositionAt, 8);
  if (c.n_stop > kMaxStopTokens) {
    return absl::InvalidArgumentError("state bundle: too many stop tokens");
  }
  if (c.position > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: position ", c.position));
  }
  c.rows_at = kFixedHeaderBytes + 4 * size_t{c.n_stop};
  if (version == 1) return c;
  const size_t names_at = c.rows_at;
  if (bytes.size() < names_at + 8 + 4) {
    return absl::InvalidArgumentError("state bundle: truncated before its chunk names");
  }
  std::memcpy(&c.n_names, bytes.data() + names_at, 4);
  std::memcpy(&c.resident, bytes.data() + names_at + 4, 4);
  const uint64_t chunks = c.position / KvRows::kChunkRows;
  if ((version == 2 && c.n_names == 0) || c.n_names > chunks || c.resident > c.n_names) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state bundle: ", c.n_names, " chunk names (", c.resident, " left out) for position ",
        c.position, " (at most one per full chunk of ", KvRows::kChunkRows, " rows)"));
  }
  c.rows_at = names_at + 8 + 16 * size_t{c.n_names};
  if (version == 2) return c;
  if (bytes.size() < c.rows_at + 24 + 4) {
    return absl::InvalidArgumentError("state bundle: truncated before its parts");
  }
  std::memcpy(&c.parts_id, bytes.data() + c.rows_at, 8);
  std::memcpy(&c.parts, bytes.data() + c.rows_at + 8, 4);
  std::memcpy(&c.part_rows, bytes.data() + c.rows_at + 16, 8);
  const uint64_t C = KvRows::kChunkRows;
  if (c.parts == 0 || c.part_rows % C != 0 || c.part_rows / C < c.parts ||
      c.part_rows / C > chunks - c.resident) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: ", c.parts, " parts of ",
                                                   c.part_rows, " rows for position ", c.position,
                                                   " past ", c.resident, " resident chunks"));
  }
  c.rows_at += 24;
  return c;
}

// Where a bundle's K/V rows start and how many it carries, when its counts and its size fit
// `config`; nullopt otherwise (the checks after the checksum then say what does not fit).
struct Layout {
  size_t rows_at = 0;
  int64_t carried = 0;
};

std::optional<Layout> LayoutOf(const absl::StatusOr<Counts>& c, size_t size,
                               const ModelConfig& config) {
  if (!c.ok() || size != StateBundleBytes(config, c->position, c->n_stop, c->n_names, c->resident,
                                          c->part_rows)) {
    return std::nullopt;
  }
  return Layout{c->rows_at, static_cast<int64_t>(c->position - c->resident * KvRows::kChunkRows -
                                                 c->part_rows)};
}

// The bundle's K/V rows and self-decoder states in `layout`, copied out while its CRC is
// computed behind the copy (a slice at a time, while it is in cache). Returns the CRC of every
// byte before the stored one.
uint32_t CopyRowsAndStates(absl::string_view bytes, const Layout& layout, const ModelConfig& config,
                           SequenceState* state) {
  uint32_t crc = Crc32cExtend(0, bytes.data(), layout.rows_at);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + layout.rows_at;
  state->shared_k = KvRows::SharedKeys(config.kv_dtype, config.kv_dim());
  state->shared_v = KvRows::SharedValues(config.kv_dtype, config.kv_dim());
  for (KvRows* rows : {&state->shared_k, &state->shared_v}) {
    AppendRowsIn(p, layout.carried, rows, &crc);
    p += rows->bytes();
  }
  state->self_states.resize(config.n_self_layers());
  for (std::vector<float>& s : state->self_states) {
    s.resize(config.self_state_floats());
    const size_t n = s.size() * sizeof(float);
    if (n > 0) std::memcpy(s.data(), p, n);
    crc = Crc32cExtend(crc, p, n);
    p += n;
  }
  return crc;
}

// Rows a bundle leaves out: its resident chunks' (named bundles only) and its parts'.
int64_t LeftOutRows(const StateBundle& b) {
  return (b.chunk_names.empty() ? 0 : b.resident_chunks * KvRows::kChunkRows) +
         (b.parts > 0 ? b.part_rows : 0);
}

uint32_t VersionOf(const StateBundle& b) {
  return b.parts > 0 ? 3 : !b.chunk_names.empty() ? 2 : 1;
}

}  // namespace

size_t SerializedStateBundleBytes(const StateBundle& b) {
  const int64_t carried = b.state.shared_k.rows() - LeftOutRows(b);
  const uint32_t version = VersionOf(b);
  size_t bytes = kFixedHeaderBytes + 4 * b.sampling.stop_token_ids.size() +
                 (version >= 2 ? 8 + 16 * b.chunk_names.size() : 0) + (version == 3 ? 24 : 0) +
                 2 * std::max<int64_t>(carried, 0) * b.state.shared_k.width() *
                     KvDtypeBytes(b.state.shared_k.dtype()) +
                 4;
  for (const auto& s : b.state.self_states) bytes += 4 * s.size();
  return bytes;
}

void SerializeStateBundleTo(const StateBundle& b, uint8_t* out) {
  const uint32_t version = VersionOf(b);
  Writer w(out);
  w.PutBytes(kMagic, sizeof kMagic);
  w.Put<uint32_t>(version);
  w.Put<uint32_t>(0);
  w.Put<uint64_t>(b.model_fingerprint);
  const uint64_t state_floats = b.state.self_states.empty() ? 0 : b.state.self_states[0].size();
  const uint32_t kv_dim = b.state.position > 0
                              ? static_cast<uint32_t>(b.state.shared_k.values() / b.state.position)
                              : 0;
  w.Put<uint32_t>(static_cast<uint32_t>(b.state.self_states.size()));
  w.Put<uint64_t>(state_floats);
  w.Put<uint32_t>(kv_dim);
  w.Put<uint32_t>(static_cast<uint32_t>(b.state.shared_k.dtype()));
  w.Put<uint64_t>(static_cast<uint64_t>(b.state.position));
  w.Put<int32_t>(b.pending_token);
  w.Put<float>(b.sampling.temperature);
  w.Put<int32_t>(b.sampling.top_k);
  w.Put<float>(b.sampling.top_p);
  w.Put<uint64_t>(b.sampling.seed);
  w.Put<uint32_t>(static_cast<uint32_t>(b.sampling.stop_token_ids.size()));
  for (int32_t id : b.sampling.stop_token_ids) w.Put<int32_t>(id);
  if (version >= 2) {
    w.Put<uint32_t>(static_cast<uint32_t>(b.chunk_names.size()));
    w.Put<uint32_t>(static_cast<uint32_t>(b.chunk_names.empty() ? 0 : b.resident_chunks));
    for (const ChunkName& name : b.chunk_names) w.PutBytes(name.data(), name.size());
  }
  if (version == 3) {
    w.Put<uint64_t>(b.parts_id);
    w.Put<uint32_t>(static_cast<uint32_t>(b.parts));
    w.Put<uint32_t>(0);
    w.Put<uint64_t>(static_cast<uint64_t>(b.part_rows));
  }
  w.PutRows(b.state.shared_k, LeftOutRows(b));
  w.PutRows(b.state.shared_v, LeftOutRows(b));
  for (const auto& s : b.state.self_states) w.PutFloats(s);
  w.PutCrc();
}

std::string SerializeStateBundle(const StateBundle& b) {
  std::string out(SerializedStateBundleBytes(b), '\0');
  SerializeStateBundleTo(b, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

uint64_t StateBundleBytes(const ModelConfig& config, uint64_t position, uint64_t stop_tokens,
                          uint64_t names, uint64_t resident, uint64_t part_rows) {
  const uint64_t carried = position - resident * KvRows::kChunkRows - part_rows;
  const uint64_t kv_values = carried * static_cast<uint64_t>(config.kv_dim());
  return kFixedHeaderBytes + 4 * stop_tokens + (names > 0 || part_rows > 0 ? 8 + 16 * names : 0) +
         (part_rows > 0 ? 24 : 0) + 2 * kv_values * KvDtypeBytes(config.kv_dtype) +
         4 * static_cast<uint64_t>(config.n_self_layers()) *
             static_cast<uint64_t>(config.self_state_floats()) +
         4;
}

absl::StatusOr<StateBundle> ParseStateBundle(absl::string_view bytes, const ModelConfig& config,
                                             uint64_t fingerprint) {
  if (bytes.size() < kFixedHeaderBytes + 4) {
    return absl::DataLossError(
        absl::StrCat("state bundle: ", bytes.size(), " bytes is too short (truncated)"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return absl::InvalidArgumentError("state bundle: bad magic (not a state bundle)");
  }
  Reader r(bytes.substr(sizeof kMagic));
  const uint32_t version = r.Get<uint32_t>();
  if (version < 1 || version > StateBundle::kVersion) {
    return absl::FailedPreconditionError(absl::StrCat("state bundle: version ", version,
                                                      " is not supported (this build reads ",
                                                      StateBundle::kVersion, ")"));
  }
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  // A bundle whose sizes fit is copied out with its CRC in one pass; the fields are trusted only
  // once the CRC matched either way.
  StateBundle b;
  // The counts behind the stop ids, read where they are (an error is reported after the CRC).
  const absl::StatusOr<Counts> counts = ReadCounts(bytes, version);
  const std::optional<Layout> layout = LayoutOf(counts, bytes.size(), config);
  const uint32_t crc = layout.has_value() ? CopyRowsAndStates(bytes, *layout, config, &b.state)
                                          : Crc32c(bytes.data(), bytes.size() - 4);
  if (crc != stored_crc) {
    return absl::DataLossError("state bundle: checksum mismatch (corrupt or truncated)");
  }
  // No flags are defined; a bundle that sets one was made by something else.
  if (const uint32_t flags = r.Get<uint32_t>(); flags != 0) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: unknown flags ", flags));
  }
  b.model_fingerprint = r.Get<uint64_t>();
  if (b.model_fingerprint != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat("state bundle: made by model ",
                                                      absl::Hex(b.model_fingerprint),
                                                      ", this is model ", absl::Hex(fingerprint)));
  }
  const uint32_t n_layers = r.Get<uint32_t>();
  const uint64_t state_floats = r.Get<uint64_t>();
  const uint32_t kv_dim = r.Get<uint32_t>();
  const uint32_t kv_dtype = r.Get<uint32_t>();
  const uint64_t position = r.Get<uint64_t>();
  if (n_layers != static_cast<uint32_t>(config.n_self_layers()) ||
      state_floats != static_cast<uint64_t>(config.self_state_floats()) ||
      kv_dim != (position > 0 ? static_cast<uint32_t>(config.kv_dim()) : 0)) {
    return absl::InvalidArgumentError("state bundle: state shapes do not match this model");
  }
  if (kv_dtype != static_cast<uint32_t>(config.kv_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("state bundle: K/V dtype ", kv_dtype, ", this worker holds K/V in ",
                     KvDtypeName(config.kv_dtype), " (--kv-dtype must match across workers)"));
  }
  b.pending_token = r.Get<int32_t>();
  b.sampling.temperature = r.Get<float>();
  b.sampling.top_k = r.Get<int32_t>();
  b.sampling.top_p = r.Get<float>();
  b.sampling.seed = r.Get<uint64_t>();
  r.Get<uint32_t>();  // the stop ids' count, in `counts`
  if (!counts.ok()) return counts.status();
  if (const uint64_t want = StateBundleBytes(config, position, counts->n_stop, counts->n_names,
                                             counts->resident, counts->part_rows);
      bytes.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state bundle: ", bytes.size(), " bytes, expected ", want, " for position ", position));
  }
  for (uint32_t i = 0; i < counts->n_stop; ++i) {
    b.sampling.stop_token_ids.push_back(r.Get<int32_t>());
  }
  if (version >= 2) {
    r.Get<uint32_t>();
    r.Get<uint32_t>();
    b.chunk_names.resize(counts->n_names);
    for (ChunkName& name : b.chunk_names) name = r.Get<ChunkName>();
    b.resident_chunks = counts->resident;
  }
  b.parts_id = counts->parts_id;
  b.parts = static_cast<int32_t>(counts->parts);
  b.part_rows = static_cast<int64_t>(counts->part_rows);
  if (b.pending_token < -1 || b.pending_token >= config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("state bundle: pending token ", b.pending_token, " out of range"));
  }
  if (absl::Status st = b.sampling.Validate(config.vocab_size); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: ", st.message()));
  }
  // The size matched StateBundleBytes above, so the rows and states were copied out.
  if (!layout.has_value()) return absl::InternalError("state bundle: layout not read");
  b.state.position = static_cast<int64_t>(position);
  return b;
}

}  // namespace yoco
