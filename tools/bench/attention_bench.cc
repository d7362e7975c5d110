// Decode attention alone: K/V in rows, in the engine's layout (keys in lanes, values in strips),
// and a plain read of the same bytes.
#include "tools/bench/attention_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"
#include "lib/engine/kv_attention_inputs.h"
#include "lib/engine/kv_rows.h"
#include "nlohmann/json.hpp"
#include "tools/bench/machine_rates.h"

namespace yoco {
namespace {

// Largest |out_lanes - out_rows| allowed, relative to the largest |out|: a few hundred fp32
// roundings over the keys' sums, far below any layout mistake (which moves outputs by O(1)).
constexpr double kLayoutTolerance = 1e-4;

// The most K/V one shape may hold (K and V in both layouts, every layer): a run asked for more is
// refused before anything is allocated.
constexpr double kMaxShapeBytes = 8.0 * (int64_t{1} << 30);

double Milliseconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A piece of a buffer for the plain read: small enough that every thread gets many.
struct ReadChunk {
  const uint8_t* data;
  int64_t bytes;
};

void AddChunks(const uint8_t* data, int64_t bytes, std::vector<ReadChunk>* chunks) {
  constexpr int64_t kChunk = 64 << 10;
  for (int64_t off = 0; off < bytes; off += kChunk) {
    chunks->push_back({data + off, std::min(kChunk, bytes - off)});
  }
}

// XOR of every 8-byte word (integer ops, so bf16 bits read as floats cannot cost FP assists).
uint64_t XorWords(const uint8_t* p, int64_t bytes) {
  int64_t i = 0;
  uint64_t acc = 0;
#ifdef YOCO_AVX2
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 128 <= bytes; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)));
  acc = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
#endif
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc ^= w;
  }
  return acc;
}

// One parallel region per layer, as the kernel has.
uint64_t ReadLayer(const std::vector<ReadChunk>& chunks) {
  uint64_t acc = 0;
  const int64_t n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) reduction(^ : acc)
  for (int64_t i = 0; i < n; ++i) acc ^= XorWords(chunks[i].data, chunks[i].bytes);
  return acc;
}

// Every layer's K/V for a batch in both layouts (rows; keys in lanes and values in strips), the
// queries and outputs.
struct AttentionCase {
  std::vector<KvRows> keys_rows, values_rows;     // [layer * batch + sequence]
  std::vector<KvRows> keys_lanes, values_strips;  // the same values
  std::vector<std::vector<float>> q;              // [layer]: [batch, dim]
  std::vector<std::vector<float>> out_rows, out_lanes;
  std::vector<std::vector<cpu::DecodeQuery>> queries_rows, queries_lanes;  // [layer]
  std::vector<std::vector<ReadChunk>> read;                                // [layer]
  int64_t bytes = 0;
};

AttentionCase MakeCase(const ModelConfig& c, const AttentionBenchShape& shape, uint64_t seed) {
  const int layers = c.n_cross_layers();
  const int64_t width = c.kv_dim(), dim = c.dim, n = shape.context;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> rows(n * width);
  auto random_rows = [&] {
    for (float& x : rows) x = uniform(rng);
    return rows.data();
  };
  AttentionCase ac;
  for (int l = 0; l < layers; ++l) {
    for (int s = 0; s < shape.batch; ++s) {
      ac.keys_rows.emplace_back(c.kv_dtype, width);
      ac.keys_lanes.push_back(KvRows::SharedKeys(c.kv_dtype, width));
      ac.values_rows.emplace_back(c.kv_dtype, width);
      ac.values_strips.push_back(KvRows::SharedValues(c.kv_dtype, width));
      const float* k = random_rows();
      ac.keys_rows.back().Append(k, n);
      ac.keys_lanes.back().Append(k, n);
      const float* v = random_rows();
      ac.values_rows.back().Append(v, n);
      ac.values_strips.back().Append(v, n);
    }
  }
  for (int l = 0; l < layers; ++l) {
    std::vector<float>& q = ac.q.emplace_back(shape.batch * dim);
    for (float& x : q) x = uniform(rng);
    ac.out_rows.emplace_back(shape.batch * dim);
    ac.out_lanes.emplace_back(shape.batch * dim);
    auto& rows_l = ac.queries_rows.emplace_back();
    auto& lanes_l = ac.queries_lanes.emplace_back();
    auto& read_l = ac.read.emplace_back();
    for (int s = 0; s < shape.batch; ++s) {
      const int64_t i = int64_t{l} * shape.batch + s;
      const float* qs = q.data() + s * dim;
      rows_l.push_back(DecodeQueryOver(qs, ac.keys_rows[i], ac.values_rows[i], n,
                                       ac.out_rows[l].data() + s * dim));
      lanes_l.push_back(DecodeQueryOver(qs, ac.keys_lanes[i], ac.values_strips[i], n,
                                        ac.out_lanes[l].data() + s * dim));
      // The bytes the kernel reads (less the last blocks' zero padding).
      for (const KvRows* kv : {&ac.keys_lanes[i], &ac.values_strips[i]}) {
        for (int64_t i = 0, left = kv->bytes(); left > 0; ++i, left -= kv->chunk_bytes()) {
          AddChunks(kv->chunk_data(i), std::min(left, kv->chunk_bytes()), &read_l);
        }
        ac.bytes += kv->bytes();
      }
    }
  }
  return ac;
}

// batch questions on one document: per cross layer one K/V in the engine's layout, read by every
// query through the same chunks.
struct SharedCase {
  std::vector<KvRows> keys, values;                    // [layer]
  std::vector<std::vector<float>> q, out;              // [layer]: [batch, dim]
  std::vector<float> alone_out;                        // query 0 alone, one layer at a time
  std::vector<std::vector<cpu::DecodeQuery>> queries;  // [layer]
};

SharedCase MakeSharedCase(const ModelConfig& c, const AttentionBenchShape& shape, uint64_t seed) {
  const int64_t width = c.kv_dim(), dim = c.dim, n = shape.context;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> rows(n * width);
  SharedCase sc;
  sc.alone_out.resize(dim);
  for (int l = 0; l < c.n_cross_layers(); ++l) {
    sc.keys.push_back(KvRows::SharedKeys(c.kv_dtype, width));
    sc.values.push_back(KvRows::SharedValues(c.kv_dtype, width));
    for (float& x : rows) x = uniform(rng);
    sc.keys.back().Append(rows.data(), n);
    for (float& x : rows) x = uniform(rng);
    sc.values.back().Append(rows.data(), n);
  }
  for (int l = 0; l < c.n_cross_layers(); ++l) {
    std::vector<float>& q = sc.q.emplace_back(shape.batch * dim);
    for (float& x : q) x = uniform(rng);
    std::vector<float>& out = sc.out.emplace_back(shape.batch * dim);
    auto& queries = sc.queries.emplace_back();
    for (int s = 0; s < shape.batch; ++s) {
      queries.push_back(
          DecodeQueryOver(q.data() + s * dim, sc.keys[l], sc.values[l], n, out.data() + s * dim));
    }
  }
  return sc;
}

double LargestRelativeDifference(const AttentionCase& ac) {
  double largest = 0, diff = 0;
  for (size_t l = 0; l < ac.out_rows.size(); ++l) {
    for (size_t i = 0; i < ac.out_rows[l].size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(ac.out_rows[l][i])));
      diff = std::max(diff, std::abs(static_cast<double>(ac.out_rows[l][i]) - ac.out_lanes[l][i]));
    }
  }
  return largest > 0 ? diff / largest : diff;
}

}  // namespace

absl::StatusOr<AttentionBenchReport> RunAttentionBench(const AttentionBenchOptions& options,
                                                       std::ostream& log) {
  const ModelConfig& c = options.config;
  if (options.rounds < 1) return absl::InvalidArgumentError("rounds must be >= 1");
  for (const AttentionBenchShape& s : options.shapes) {
    if (s.batch < 1 || s.context < 1) {
      return absl::InvalidArgumentError("every shape needs a batch and a context of at least 1");
    }
    const double bytes =
        4.0 * c.n_cross_layers() * s.batch * s.context * c.kv_dim() * KvDtypeBytes(c.kv_dtype);
    if (bytes > kMaxShapeBytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "batch %d x context %d needs %.1f GB of K/V, more than the %.1f GB this benchmark "
          "holds",
          s.batch, s.context, bytes / 1e9, kMaxShapeBytes / 1e9));
    }
  }
  for (const AttentionBenchShape& s : options.shared) {
    if (s.batch < 1 || s.context < 1) {
      return absl::InvalidArgumentError("every shared shape needs a batch and a context of >= 1");
    }
    const double bytes =
        2.0 * c.n_cross_layers() * s.context * c.kv_dim() * KvDtypeBytes(c.kv_dtype);
    if (bytes > kMaxShapeBytes) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("a document of %d keys needs %.1f GB of K/V, more than the %.1f GB this "
                          "benchmark holds",
                          s.context, bytes / 1e9, kMaxShapeBytes / 1e9));
    }
  }
  AttentionBenchReport report;
  report.threads = cpu::KernelThreads();
  report.kv_dtype = KvDtypeName(c.kv_dtype);
  report.q_heads = c.n_attn_heads;
  report.kv_heads = c.n_attn_kv_heads;
  report.head_dim = c.cross_head_dim();
  const cpu::GqaShape gqa{c.n_attn_heads, c.n_attn_kv_heads, c.cross_head_dim()};
  log << "probing the read bandwidth\n";
  report.membw_gbs = MeasureReadBandwidthGbs(int64_t{256} << 20, 3);
  cpu::DecodeAttentionScratch scratch;
  volatile uint64_t sink = 0;
  uint64_t seed = 1;
  for (const AttentionBenchShape& shape : options.shapes) {
    log << "attention: batch " << shape.batch << ", context " << shape.context << "\n";
    AttentionCase ac = MakeCase(c, shape, seed++);
    auto run_kernel = [&](std::vector<std::vector<cpu::DecodeQuery>>& queries) {
      const auto t0 = std::chrono::steady_clock::now();
      for (auto& layer : queries) cpu::DecodeAttention(gqa, layer.data(), shape.batch, &scratch);
      return Milliseconds(t0);
    };
    auto run_read = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      uint64_t acc = 0;
      for (const auto& layer : ac.read) acc ^= ReadLayer(layer);
      sink = sink ^ acc;
      return Milliseconds(t0);
    };
    run_read();  // warm-up: page faults, scratch growth
    run_kernel(ac.queries_rows);
    run_kernel(ac.queries_lanes);
    std::vector<double> read_ms, rows_ms, lanes_ms, lanes_over_read, rows_over_lanes;
    for (int r = 0; r < options.rounds; ++r) {
      double t[3];
      for (int i = 0; i < 3; ++i) {
        const int which = (r + i) % 3;
        t[which] = which == 0   ? run_read()
                   : which == 1 ? run_kernel(ac.queries_rows)
                                : run_kernel(ac.queries_lanes);
      }
      read_ms.push_back(t[0]);
      rows_ms.push_back(t[1]);
      lanes_ms.push_back(t[2]);
      lanes_over_read.push_back(t[0] / t[2]);
      rows_over_lanes.push_back(t[1] / t[2]);
    }
    AttentionMeasurement m;
    m.shape = shape;
    m.layers = c.n_cross_layers();
    m.bytes = ac.bytes;
    m.read_ms = SpreadOf(read_ms);
    m.rows_ms = SpreadOf(rows_ms);
    m.lanes_ms = SpreadOf(lanes_ms);
    m.lanes_over_read = SpreadOf(lanes_over_read);
    m.rows_over_lanes = SpreadOf(rows_over_lanes);
    m.lanes_rows_difference = LargestRelativeDifference(ac);
    if (!(m.lanes_rows_difference <= kLayoutTolerance)) {
      return absl::InternalError(absl::StrCat(
          "the lanes and the rows layout disagree: relative difference ", m.lanes_rows_difference,
          " at batch ", shape.batch, ", context ", shape.context));
    }
    report.rows.push_back(m);
  }
  if (!options.shared.empty()) {
    log << "probing the sgemm rate\n";
    report.sgemm_gflops = SgemmProbe().MeasureGflops();
  }
  for (const AttentionBenchShape& shape : options.shared) {
    log << "attention: " << shape.batch << " questions on one document of " << shape.context
        << " keys\n";
    SharedCase sc = MakeSharedCase(c, shape, seed++);
    auto run_alone = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      for (auto& layer : sc.queries) {
        cpu::DecodeQuery q = layer[0];
        q.out = sc.alone_out.data();
        cpu::DecodeAttention(gqa, &q, 1, &scratch);
      }
      return Milliseconds(t0);
    };
    auto run_shared = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      for (auto& layer : sc.queries) cpu::DecodeAttention(gqa, layer.data(), shape.batch, &scratch);
      return Milliseconds(t0);
    };
    run_alone();  // warm-up: page faults, scratch growth
    run_shared();
    // The last layer's query 0: alone (run_alone's last call) and shared, the same bits.
    if (std::memcmp(sc.alone_out.data(), sc.out.back().data(), sizeof(float) * c.dim) != 0) {
      return absl::InternalError(absl::StrCat("a query sharing a document with ", shape.batch - 1,
                                              " others differs from its output alone"));
    }
    // Multiply-adds: every query head's scores and weighted sums over every key, d each.
    const double flop = 4.0 * shape.batch * c.n_cross_layers() * c.n_attn_heads * shape.context *
                        c.cross_head_dim();
    std::vector<double> alone_ms, shared_ms, speedup, gflops;
    for (int r = 0; r < options.rounds; ++r) {
      double alone, shared;
      if (r % 2 == 0) {
        alone = run_alone();
        shared = run_shared();
      } else {
        shared = run_shared();
        alone = run_alone();
      }
      alone_ms.push_back(alone);
      shared_ms.push_back(shared);
      speedup.push_back(shape.batch * alone / shared);
      gflops.push_back(flop / shared / 1e6);
    }
    SharedAttentionMeasurement m;
    m.shape = shape;
    m.layers = c.n_cross_layers();
    m.alone_ms = SpreadOf(alone_ms);
    m.shared_ms = SpreadOf(shared_ms);
    m.speedup = SpreadOf(speedup);
    m.gflops = SpreadOf(gflops);
    report.shared.push_back(m);
  }
  return report;
}

std::string AttentionBenchReport::ToJson() const {
  auto spread = [](const Spread& s) {
    return nlohmann::json{{"median", s.median}, {"min", s.min}, {"max", s.max}};
  };
  nlohmann::json j;
  j["threads"] = threads;
  j["kv_dtype"] = kv_dtype;
  j["q_heads"] = q_heads;
  j["kv_heads"] = kv_heads;
  j["head_dim"] = head_dim;
  j["membw_gbs"] = membw_gbs;
  j["attention"] = nlohmann::json::array();
  for (const AttentionMeasurement& m : rows) {
    j["attention"].push_back({{"batch", m.shape.batch},
                              {"context", m.shape.context},
                              {"layers", m.layers},
                              {"bytes", m.bytes},
                              {"read_ms", spread(m.read_ms)},
                              {"rows_ms", spread(m.rows_ms)},
                              {"lanes_ms", spread(m.lanes_ms)},
                              {"read_gbs", m.bytes / m.read_ms.median / 1e6},
                              {"lanes_gbs", m.bytes / m.lanes_ms.median / 1e6},
                              {"lanes_over_read", spread(m.lanes_over_read)},
                              {"rows_over_lanes", spread(m.rows_over_lanes)},
                              {"lanes_rows_difference", m.lanes_rows_difference}});
  }
  j["sgemm_gflops"] = sgemm_gflops;
  j["shared"] = nlohmann::json::array();
  for (const SharedAttentionMeasurement& m : shared) {
    j["shared"].push_back({{"batch", m.shape.batch},
                           {"context", m.shape.context},
                           {"layers", m.layers},
                           {"alone_ms", spread(m.alone_ms)},
                           {"shared_ms", spread(m.shared_ms)},
                           {"speedup", spread(m.speedup)},
                           {"gflops", spread(m.gflops)}});
  }
  return j.dump(2) + "\n";
}

std::string AttentionBenchReport::ToTable() const {
  std::string out = absl::StrFormat(
      "decode attention alone (threads %d, %s K/V, %d query heads over %d KV heads, d %d; "
      "probe %.0f GB/s)\n"
      "%6s %8s %8s %9s %9s %9s %9s %16s %16s\n",
      threads, kv_dtype, q_heads, kv_heads, head_dim, membw_gbs, "batch", "context", "K/V MB",
      "read ms", "rows ms", "lanes ms", "lane GB/s", "lanes/read", "rows/lanes");
  for (const AttentionMeasurement& m : rows) {
    out += absl::StrFormat(
        "%6d %8d %8.1f %9.2f %9.2f %9.2f %9.1f %5.0f%% [%3.0f-%3.0f] %5.2fx [%.2f-%.2f]\n",
        m.shape.batch, m.shape.context, m.bytes / 1e6, m.read_ms.median, m.rows_ms.median,
        m.lanes_ms.median, m.bytes / m.lanes_ms.median / 1e6, 100 * m.lanes_over_read.median,
        100 * m.lanes_over_read.min, 100 * m.lanes_over_read.max, m.rows_over_lanes.median,
        m.rows_over_lanes.min, m.rows_over_lanes.max);
  }
  if (!shared.empty()) {
    out += absl::StrFormat(
        "questions on one document (keys in lanes, values in strips; sgemm probe %.0f GFLOP/s)\n"
        "%6s %8s %9s %9s %20s %20s\n",
        sgemm_gflops, "batch", "context", "alone ms", "batch ms", "batch x alone/batch", "GFLOP/s");
    for (const SharedAttentionMeasurement& m : shared) {
      out += absl::StrFormat("%6d %8d %9.2f %9.2f %6.2fx [%.2f-%.2f] %6.0f [%.0f-%.0f]\n",
                             m.shape.batch, m.shape.context, m.alone_ms.median, m.shared_ms.median,
                             m.speedup.median, m.speedup.min, m.speedup.max, m.gflops.median,
                             m.gflops.min, m.gflops.max);
    }
  }
  return out;
}

}  // namespace yoco
