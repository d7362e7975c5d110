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

namespace yoco {
namespace {

constexpr char kMagic[8] = {'Y', 'O', 'C', 'O', 'B', 'N', 'D', 'L'};
constexpr size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + 4 + 8 + 4 + 4 + 8 + 4 + 4 + 4 + 4 + 8 + 4;
constexpr uint32_t kMaxStopTokens = 1024;

// Rows copied (and checksummed) at a time: a slice stays in cache between the copy and the CRC,
// so a gigabyte of K/V is read from memory once, not once per pass.
constexpr int64_t kSliceBytes = 128 << 10;

int64_t SliceRows(const KvRows& rows) {
  return std::max<int64_t>(1, kSliceBytes / (rows.width() * KvDtypeBytes(rows.dtype())));
}

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
    const int64_t row_bytes = rows.width() * KvDtypeBytes(rows.dtype());
    for (int64_t n; (n = std::min(rows.rows() - row0, SliceRows(rows))) > 0; row0 += n) {
      rows.CopyRowBytes(row0, n, out_ + pos_);
      pos_ += n * row_bytes;
      Seal();
    }
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

// Where a bundle's K/V rows start and how many it carries, when its counts and its size fit
// `config`; nullopt otherwise (the checks after the checksum then say what does not fit).
struct Layout {
  size_t rows_at = 0;
  int64_t carried = 0;
};

std::optional<Layout> LayoutOf(absl::string_view bytes, uint32_t version,
                               const ModelConfig& config) {
  constexpr size_t kPositionAt = 8 + 4 + 4 + 8 + 4 + 8 + 4 + 4;
  uint32_t n_stop, n_names = 0, resident = 0;
  uint64_t position;
  std::memcpy(&n_stop, bytes.data() + kFixedHeaderBytes - 4, 4);
  std::memcpy(&position, bytes.data() + kPositionAt, 8);
  if (n_stop > kMaxStopTokens || position > (uint64_t{1} << 40)) return std::nullopt;
  size_t rows_at = kFixedHeaderBytes + 4 * size_t{n_stop};
  if (version == 2) {
    if (bytes.size() < rows_at + 8 + 4) return std::nullopt;
    std::memcpy(&n_names, bytes.data() + rows_at, 4);
    std::memcpy(&resident, bytes.data() + rows_at + 4, 4);
    if (n_names == 0 || n_names > position / KvRows::kChunkRows || resident > n_names) {
      return std::nullopt;
    }
    rows_at += 8 + 16 * size_t{n_names};
  }
  if (bytes.size() != StateBundleBytes(config, position, n_stop, n_names, resident)) {
    return std::nullopt;
  }
  return Layout{rows_at, static_cast<int64_t>(position) - int64_t{resident} * KvRows::kChunkRows};
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
    const int64_t row_bytes = rows->width() * KvDtypeBytes(rows->dtype());
    for (int64_t done = 0, n; (n = std::min(layout.carried - done, SliceRows(*rows))) > 0;
         done += n) {
      rows->AppendRowBytes(p, n);
      crc = Crc32cExtend(crc, p, n * row_bytes);
      p += n * row_bytes;
    }
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

// Rows a bundle leaves out: its resident chunks' (named bundles only).
int64_t ResidentRows(const StateBundle& b) {
  return b.chunk_names.empty() ? 0 : b.resident_chunks * KvRows::kChunkRows;
}

}  // namespace

size_t SerializedStateBundleBytes(const StateBundle& b) {
  const int64_t carried = b.state.shared_k.rows() - ResidentRows(b);
  size_t bytes = kFixedHeaderBytes + 4 * b.sampling.stop_token_ids.size() +
                 (b.chunk_names.empty() ? 0 : 8 + 16 * b.chunk_names.size()) +
                 2 * std::max<int64_t>(carried, 0) * b.state.shared_k.width() *
                     KvDtypeBytes(b.state.shared_k.dtype()) +
                 4;
  for (const auto& s : b.state.self_states) bytes += 4 * s.size();
  return bytes;
}

void SerializeStateBundleTo(const StateBundle& b, uint8_t* out) {
  const bool named = !b.chunk_names.empty();
  Writer w(out);
  w.PutBytes(kMagic, sizeof kMagic);
  w.Put<uint32_t>(named ? 2 : 1);
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
  if (named) {
    w.Put<uint32_t>(static_cast<uint32_t>(b.chunk_names.size()));
    w.Put<uint32_t>(static_cast<uint32_t>(b.resident_chunks));
    for (const ChunkName& name : b.chunk_names) w.PutBytes(name.data(), name.size());
  }
  w.PutRows(b.state.shared_k, ResidentRows(b));
  w.PutRows(b.state.shared_v, ResidentRows(b));
  for (const auto& s : b.state.self_states) w.PutFloats(s);
  w.PutCrc();
}

std::string SerializeStateBundle(const StateBundle& b) {
  std::string out(SerializedStateBundleBytes(b), '\0');
  SerializeStateBundleTo(b, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

uint64_t StateBundleBytes(const ModelConfig& config, uint64_t position, uint64_t stop_tokens,
                          uint64_t names, uint64_t resident) {
  const uint64_t carried = position - resident * KvRows::kChunkRows;
  const uint64_t kv_values = carried * static_cast<uint64_t>(config.kv_dim());
  return kFixedHeaderBytes + 4 * stop_tokens + (names > 0 ? 8 + 16 * names : 0) +
         2 * kv_values * KvDtypeBytes(config.kv_dtype) +
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
  if (version != 1 && version != StateBundle::kVersion) {
    return absl::FailedPreconditionError(absl::StrCat("state bundle: version ", version,
                                                      " is not supported (this build reads ",
                                                      StateBundle::kVersion, ")"));
  }
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  // A bundle whose sizes fit is copied out with its CRC in one pass; the fields are trusted only
  // once the CRC matched either way.
  StateBundle b;
  const std::optional<Layout> layout = LayoutOf(bytes, version, config);
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
  const uint32_t n_stop = r.Get<uint32_t>();
  if (n_stop > kMaxStopTokens)
    return absl::InvalidArgumentError("state bundle: too many stop tokens");
  if (position > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("state bundle: position ", position));
  }
  // The names' counts sit behind the stop ids: read them where they are once the ids fit.
  uint32_t n_names = 0, resident = 0;
  if (version == 2) {
    const size_t at = kFixedHeaderBytes + 4 * size_t{n_stop};
    if (bytes.size() < at + 8 + 4) {
      return absl::InvalidArgumentError("state bundle: truncated before its chunk names");
    }
    std::memcpy(&n_names, bytes.data() + at, 4);
    std::memcpy(&resident, bytes.data() + at + 4, 4);
    if (n_names == 0 || n_names > position / KvRows::kChunkRows || resident > n_names) {
      return absl::InvalidArgumentError(absl::StrCat(
          "state bundle: ", n_names, " chunk names (", resident, " left out) for position ",
          position, " (at most one per full chunk of ", KvRows::kChunkRows, " rows)"));
    }
  }
  if (const uint64_t want = StateBundleBytes(config, position, n_stop, n_names, resident);
      bytes.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state bundle: ", bytes.size(), " bytes, expected ", want, " for position ", position));
  }
  for (uint32_t i = 0; i < n_stop; ++i) b.sampling.stop_token_ids.push_back(r.Get<int32_t>());
  if (version == 2) {
    r.Get<uint32_t>();
    r.Get<uint32_t>();
    b.chunk_names.resize(n_names);
    for (ChunkName& name : b.chunk_names) name = r.Get<ChunkName>();
    b.resident_chunks = resident;
  }
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
