// Two regimes. Few rows (decode batches; with AVX-512, up to 256 rows of packed bf16 and 32 of
// q8): a streaming kernel reads each weight row once per call and applies it to every input
// row, so a step costs one pass over the weights. Many rows (prefill): fp32 weights go straight
// to sgemm; bf16 and q8 weights are widened a block of rows at a time, a cost amortised over the
// m input rows.
#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {
namespace {

// Up to this many input rows the streaming kernel is used for every weight layout: it reads each
// weight once per call and, with its register tiles, runs near the FMA peak once the rows reach
// a handful.
constexpr int64_t kStreamingRows = 8;
// bf16 and q8 rows widened to fp32 per sgemm call: larger blocks measured faster up to 2048
// rows at 16-32 input rows (fewer calls; 256: 437 tok/s at batch 32, 1024: 604), 1024 keeps
// the scratch at 8 MB for k = 2048.
constexpr int64_t kWidenBlockRows = 1024;
// Up to this many input rows the product is taken as yᵀ = W·xᵀ: oneDNN's sgemm runs that form
// 1.1-5x faster than y = x·Wᵀ when x has few rows (measured at 32-256 rows, k = 768 and 2048:
// 345-363 against 52-231 GFLOP/s at 32-64 rows), and the transpose back costs m·n moves.
constexpr int64_t kTransposedRows = 256;
constexpr int64_t kRowsPerTask = 32;  // weight rows per parallel task

}  // namespace

// With AVX-512 the packed bf16 groups keep the register tiles fed from L1 at any row count:
// 304-313 GFLOP/s at 16-256 rows against widening + sgemm's 183-280 (a layer's projections,
// 12.6 MB of bf16, 2 threads); q8 blocks win up to 32 rows (214-227 against 152-204) and tie
// beyond; fp32 rows (no packing) fall to a quarter of sgemm's rate past 8. Matrices of fewer
// rows than a group (a layer's decay-gate logits) cost nothing either way and stream with the
// packed ones, so that a whole bf16 model is streamed alike. With AVX2 alone the packed pair
// tiles beat widening + an AVX2 sgemm up to 32 rows (126 MB of bf16, 2 threads, oneDNN held to
// AVX2: 12 rows 11.7-12.1 against 20.2-20.5 ms, 16 rows 14.8-15.0 against 18.9-19.0, 32 rows
// 27.3-27.4 against 30.6-31.0; 64 rows tie), but not an AVX-512 sgemm, which oneDNN picks at run
// time on an AVX-512 CPU whatever this build's -march (16 rows 15.3 against 14.6 ms, 32 rows
// 27.5 against 20.6).
int64_t StreamingRows(const WeightMatrix& w) {
#if defined(__AVX512F__)
  if (w.packed || w.rows < 8) return kTransposedRows;
  if (w.type == WeightType::kQ8) return 32;
#elif defined(YOCO_AVX2)
  static const bool sgemm_has_avx512 = __builtin_cpu_supports("avx512f");
  if ((w.packed || w.rows < 8) && !sgemm_has_avx512) return 32;
#endif
  return kStreamingRows;
}

namespace {

template <WeightType kType>
inline float WeightAt(const void* row, int64_t i) {
  if constexpr (kType == WeightType::kF32) {
    return static_cast<const float*>(row)[i];
  } else {
    const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(row)[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
}

template <WeightType kType>
inline const void* WeightRow(const WeightMatrix& w, int64_t n) {
  return static_cast<const char*>(w.data) + n * w.cols * (kType == WeightType::kF32 ? 4 : 2);
}

#ifdef YOCO_AVX2
template <WeightType kType>
inline __m256 LoadWeights8(const void* row, int64_t i) {
  if constexpr (kType == WeightType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    return LoadBf16x8(static_cast<const uint16_t*>(row) + i);
  }
}
#endif

// y[r, n0 + j] for r < M, j < NB: a register tile of M input rows × NB weight rows. Column i
// of weight row j is element i * kStride of rows[j] (1: row-major; 8: a packed group, where
// 8 columns of one row are followed by the same columns of the group's other 7 rows; only builds
// without AVX2 take packed groups here).
template <WeightType kType, int M, int NB, int kStride = 1>
inline void Tile(const float* x, int64_t ldx, const WeightMatrix& w, int64_t n0, float* y,
                 bool accumulate, const void* const* packed_rows = nullptr) {
  const int64_t k = w.cols;
  const void* rows[NB];
  for (int j = 0; j < NB; ++j) {
    rows[j] = kStride == 1 ? WeightRow<kType>(w, n0 + j) : packed_rows[j];
  }
  float sums[M][NB];
  int64_t i = 0;
#ifdef YOCO_AVX2
  __m256 acc[M][NB];
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < NB; ++j) acc[r][j] = _mm256_setzero_ps();
  for (; i + 8 <= k; i += 8) {
    __m256 wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = LoadWeights8<kType>(rows[j], i * kStride);
    for (int r = 0; r < M; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * ldx + i);
      for (int j = 0; j < NB; ++j) acc[r][j] = _mm256_fmadd_ps(wv[j], xv, acc[r][j]);
    }
  }
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < NB; ++j) sums[r][j] = HorizontalSum(acc[r][j]);
#else
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < NB; ++j) sums[r][j] = 0.0f;
#endif
  for (; i < k; ++i) {  // packed rows have cols % 8 == 0: only row-major ones get here
    for (int j = 0; j < NB; ++j) {
      const float wi = WeightAt<kType>(rows[j], (i / 8) * 8 * kStride + i % 8);
      for (int r = 0; r < M; ++r) sums[r][j] += wi * x[r * ldx + i];
    }
  }
  for (int r = 0; r < M; ++r) {
    float* yr = y + r * w.rows + n0;
    for (int j = 0; j < NB; ++j) yr[j] = accumulate ? yr[j] + sums[r][j] : sums[r][j];
  }
}

// Input rows [0, m) against weight rows [n0, n1): weight tiles stay in L1 while the input rows
// pass over them four at a time.
template <WeightType kType>
void StreamBlock(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
                 int64_t n0, int64_t n1) {
  const int64_t k = w.cols;
  int64_t n = n0;
  for (; n + 3 <= n1; n += 3) {
    int64_t r = 0;
    if (m == 1) {
      // One row: widen the tile to keep enough independent FMA chains in flight.
      if (n + 6 <= n1) {
        Tile<kType, 1, 6>(x, k, w, n, y, accumulate);
        n += 3;
        continue;
      }
      Tile<kType, 1, 3>(x, k, w, n, y, accumulate);
      continue;
    }
    for (; r + 4 <= m; r += 4) Tile<kType, 4, 3>(x + r * k, k, w, n, y + r * w.rows, accumulate);
    for (; r + 2 <= m; r += 2) Tile<kType, 2, 3>(x + r * k, k, w, n, y + r * w.rows, accumulate);
    for (; r < m; ++r) Tile<kType, 1, 3>(x + r * k, k, w, n, y + r * w.rows, accumulate);
  }
  for (; n < n1; ++n) {
    for (int64_t r = 0; r < m; ++r)
      Tile<kType, 1, 1>(x + r * k, k, w, n, y + r * w.rows, accumulate);
  }
}

#ifdef YOCO_AVX2
// What a tile over a packed group asks for while it computes, one 128-byte chunk (two lines) per
// chunk computed: the next group into L1, the one after into L2 (either may be null).
struct GroupPrefetch {
  const uint16_t* l1 = nullptr;
  const uint16_t* l2 = nullptr;
};

// Always inlined: GCC 12 finds a function whose only effect is a prefetch free of side effects,
// and drops every call it does not inline (it did here: no prefetch left in the tiles).
[[gnu::always_inline]] inline void PrefetchChunk(const GroupPrefetch& p, int64_t c) {
  if (p.l1 != nullptr) {
    _mm_prefetch(reinterpret_cast<const char*>(p.l1 + c * 8), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p.l1 + c * 8 + 32), _MM_HINT_T0);
  }
  if (p.l2 != nullptr) {
    _mm_prefetch(reinterpret_cast<const char*>(p.l2 + c * 8), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(p.l2 + c * 8 + 32), _MM_HINT_T1);
  }
}
#endif

#if defined(__AVX512F__)
// One packed group of 8 weight rows against one input row: 8 independent FMA chains over one
// contiguous stream. The same bits as PackedGroupTile below.
inline void PackedGroup1(const float* x, const uint16_t* group, int64_t k, float* y,
                         bool accumulate) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t c = 0; c < k; c += 8) {
    const __m256 xv = _mm256_loadu_ps(x + c);
    const uint16_t* chunk = group + c * 8;
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(LoadBf16x8(chunk + j * 8), xv, acc[j]);
  }
  for (int j = 0; j < 8; ++j) {
    const float v = HorizontalSum(acc[j]);
    y[j] = accumulate ? y[j] + v : v;
  }
}

// M input rows against all 8 rows of a packed group. A zmm holds two weight rows' 8 columns, so
// each lane accumulates exactly what PackedGroup1's lane does, in the same order: the same bits
// as PackedGroup1, with a quarter of the instructions. The all-lanes masked
// intrinsics: GCC 12's plain ones warn of an uninitialised use.
template <int M>
inline void PackedGroupTile(const float* x, int64_t ldx, const uint16_t* group, int64_t k, float* y,
                            int64_t ldy, bool accumulate, GroupPrefetch prefetch) {
  __m512 acc[M][4];
  for (int r = 0; r < M; ++r)
    for (int p = 0; p < 4; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int64_t c = 0; c < k; c += 8) {
    const uint16_t* chunk = group + c * 8;
    PrefetchChunk(prefetch, c);
    __m512 wv[4];
    for (int p = 0; p < 4; ++p) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + p * 16));
      wv[p] = _mm512_castsi512_ps(
          _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
    }
    for (int r = 0; r < M; ++r) {
      const __m256d x8 = _mm256_castps_pd(_mm256_loadu_ps(x + r * ldx + c));
      const __m512 xv = _mm512_castpd_ps(_mm512_maskz_broadcast_f64x4(0xFF, x8));
      for (int p = 0; p < 4; ++p) acc[r][p] = _mm512_fmadd_ps(wv[p], xv, acc[r][p]);
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int p = 0; p < 4; ++p) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][p]);
      const float v0 = HorizontalSum(_mm256_load_ps(lanes));
      const float v1 = HorizontalSum(_mm256_load_ps(lanes + 8));
      float* yr = y + r * ldy + 2 * p;
      yr[0] = accumulate ? yr[0] + v0 : v0;
      yr[1] = accumulate ? yr[1] + v1 : v1;
    }
  }
}
#elif defined(YOCO_AVX2)
// Without AVX-512, a packed group's chunk (8 columns of its 8 rows) is read as 4 ymm loads of a
// row pair each, and a load is widened to fp32 with one instruction per 8 values: shifting each
// 32-bit lane left by 16 gives both rows' even columns, clearing its low half their odd ones,
// where a zero-extending load and a shift per 8 values took twice the vector-ALU work. The input
// rows are read interleaved to match (InterleavePairs). Streaming 126 MB (40 × 2048×768), 2
// threads, -march=x86-64-v3: 2 rows 4.3-5.5 -> 3.4-3.6 ms, 4 rows 5.5 -> 4.6-4.9, 8 rows 9.4 ->
// 8.2-8.5 (in L2: unchanged; 8 rows as 8 × 1 pair instead of 4 × 2 pairs: slower). Every tile
// sums a lane as even then odd column, chunk after chunk, and a row as its 4 lanes: the same bits
// for any number of input rows.

// Each 8 columns of x (m × k, k % 8 == 0) reordered as x0 x2 x4 x6 x1 x3 x5 x7.
void InterleavePairs(const float* x, int64_t m, int64_t k, float* out) {
  const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t i = 0; i < m * k; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + i), order));
  }
}

inline float Sum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// M interleaved input rows (xi, k apart) against the P row pairs of a packed group starting at
// pair p0: y[r * ldy + j] for its rows j.
template <int M, int P>
inline void PackedPairTile(const float* xi, int64_t k, const uint16_t* group, int p0, float* y,
                           int64_t ldy, bool accumulate, GroupPrefetch prefetch) {
  const __m256i high_halves = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 acc[M][P];
  for (int r = 0; r < M; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm256_setzero_ps();
  for (int64_t c = 0; c < k; c += 8) {
    const uint16_t* chunk = group + c * 8;
    PrefetchChunk(prefetch, c);
    __m256 even[P], odd[P];
    for (int p = 0; p < P; ++p) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + (p0 + p) * 16));
      even[p] = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
      odd[p] = _mm256_castsi256_ps(_mm256_and_si256(h, high_halves));
    }
    for (int r = 0; r < M; ++r) {
      const __m256 xe = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(xi + r * k + c));
      const __m256 xo = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(xi + r * k + c + 4));
      for (int p = 0; p < P; ++p) {
        acc[r][p] = _mm256_fmadd_ps(even[p], xe, acc[r][p]);
        acc[r][p] = _mm256_fmadd_ps(odd[p], xo, acc[r][p]);
      }
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int p = 0; p < P; ++p) {
      const float v0 = Sum4(_mm256_castps256_ps128(acc[r][p]));
      const float v1 = Sum4(_mm256_extractf128_ps(acc[r][p], 1));
      float* yr = y + r * ldy + 2 * (p0 + p);
      yr[0] = accumulate ? yr[0] + v0 : v0;
      yr[1] = accumulate ? yr[1] + v1 : v1;
    }
  }
}
#endif

// Input rows [0, m) against the packed groups [g0, g1) of a packed bf16 matrix; xi: x as
// InterleavePairs reorders it (builds with AVX2 but not AVX-512 only).
void StreamPackedGroups(const float* x, const float* xi, int64_t m, const WeightMatrix& w, float* y,
                        bool accumulate, int64_t g0, int64_t g1) {
  const int64_t k = w.cols;
  const uint16_t* base = static_cast<const uint16_t*>(w.data);
  for (int64_t g = g0; g < g1; ++g) {
    const uint16_t* group = base + g * 8 * k;
    const int64_t n0 = g * 8;
    // The first tile over a group asks for the next: left to the hardware prefetcher, the group
    // arrives only when the tiles ask for it, and the reads and the arithmetic do not overlap
    // (measured with AVX-512, 2 threads, 126 MB of weights: 4 rows 2.53 -> 1.96 ms, 8 rows
    // 6.60 -> 4.85 ms, 32 rows 16.2 -> 14.8 ms; a group ahead is as good as 2 or 4; asking for
    // the whole group at once is slower). One row streams at the bus's pace without it.
    const uint16_t* next = g + 1 < w.rows / 8 ? group + 8 * k : nullptr;
    const uint16_t* after = g + 2 < w.rows / 8 ? group + 16 * k : nullptr;
#if defined(__AVX512F__)
    if (m == 1) {
      PackedGroup1(x, group, k, y + n0, accumulate);
      continue;
    }
    // With more than one tile, the second asks for the group after the next in L2: the
    // requests are spread over twice the arithmetic, and the reads and the arithmetic overlap
    // better. All 50 decode products of the 12-layer dim-768 shape (213 MB), 2 threads,
    // alternating runs: 8 rows 8.7-10.1 -> 7.3-8.7 ms, 16 rows 14.4-15.9 -> 12.8-14.8, 32 rows
    // 25.2-27.0 -> 22.8-24.1; `yoco bench`, 4 runs each: batch 8 395-417 -> 436-473 tokens/s,
    // batch 32 423-501 -> 436-506. (The same tile asking for the second half of the next group
    // in L1: as good at 8 rows, less at 16 and 32; the first tile asking for both: no gain.)
    int tiles = 0;
    auto prefetch = [&] {
      const int t = tiles++;
      return t == 0   ? GroupPrefetch{next, nullptr}
             : t == 1 ? GroupPrefetch{nullptr, after}
                      : GroupPrefetch{};
    };
    // Six rows a tile where there are six (24 accumulators): each widened weight vector then
    // feeds six FMAs, not four, and the widening (a shuffle and a shift per 16 values) takes
    // less of the vector pipes the FMAs share. 40 products 2048x768, 2 threads, alternating
    // runs: 12 rows 6.0 -> 5.2-5.4 ms, 16 rows 7.6-7.7 -> 6.8-6.9, 32 rows 13.9-14.1 -> 13.2-13.4
    // (768x2048: 13.6-13.7 -> 12.7-12.8). The same bits: a lane's sum does not depend on M.
    int64_t r = 0;
    for (; r + 6 <= m; r += 6) {
      PackedGroupTile<6>(x + r * k, k, group, k, y + r * w.rows + n0, w.rows, accumulate,
                         prefetch());
    }
    for (; r + 4 <= m; r += 4) {
      PackedGroupTile<4>(x + r * k, k, group, k, y + r * w.rows + n0, w.rows, accumulate,
                         prefetch());
    }
    for (; r + 2 <= m; r += 2) {
      PackedGroupTile<2>(x + r * k, k, group, k, y + r * w.rows + n0, w.rows, accumulate,
                         prefetch());
    }
    for (; r < m; ++r) {
      PackedGroupTile<1>(x + r * k, k, group, k, y + r * w.rows + n0, w.rows, accumulate,
                         prefetch());
    }
    continue;
#elif defined(YOCO_AVX2)
    (void)after;
    if (m == 1) {
      PackedPairTile<1, 4>(xi, k, group, 0, y + n0, w.rows, accumulate, GroupPrefetch{});
      continue;
    }
    // Two row pairs at a time (16 registers). The first tile asks for the next group, as above
    // (-march=x86-64-v3 on the same VM: 2 rows 5.7 -> 4.5 ms, 4 rows 7.2 -> 6.1, 8 rows 14.3 ->
    // 11.1; the whole group asked for at once: 5.0, 7.0, 11.8).
    for (int p0 = 0; p0 < 4; p0 += 2) {
      // (The group after the next asked for in L2 by the p0 = 2 tiles, as with AVX-512: no gain
      // measured.)
      const GroupPrefetch first = p0 == 0 ? GroupPrefetch{next, nullptr} : GroupPrefetch{};
      int64_t r = 0;
      for (; r + 4 <= m; r += 4) {
        PackedPairTile<4, 2>(xi + r * k, k, group, p0, y + r * w.rows + n0, w.rows, accumulate,
                             r == 0 ? first : GroupPrefetch{});
      }
      for (; r + 2 <= m; r += 2) {
        PackedPairTile<2, 2>(xi + r * k, k, group, p0, y + r * w.rows + n0, w.rows, accumulate,
                             r == 0 ? first : GroupPrefetch{});
      }
      for (; r < m; ++r) {
        PackedPairTile<1, 2>(xi + r * k, k, group, p0, y + r * w.rows + n0, w.rows, accumulate,
                             r == 0 ? first : GroupPrefetch{});
      }
    }
#else
    (void)next;  // without AVX2, prefetching is left to the hardware
    (void)after;
    for (int64_t jj = 0; jj < 8; jj += 2) {
      const void* rows[2] = {group + jj * 8, group + (jj + 1) * 8};
      for (int64_t r = 0; r < m; ++r) {
        Tile<WeightType::kBF16, 1, 2, 8>(x + r * k, k, w, n0 + jj, y + r * w.rows, accumulate,
                                         rows);
      }
    }
#endif
  }
}

// The streaming kernel's unit of parallel work: kRowsPerTask weight rows of one matrix (a packed
// bf16 matrix's rows after its last full group are one more task). How the rows are split
// changes no result: every row's sums run the same way in any task.
constexpr int64_t kGroupsPerTask = kRowsPerTask / 8;

int64_t StreamTasks(const WeightMatrix& w) {
  if (w.type == WeightType::kQ8) return ((w.rows + 7) / 8 + kGroupsPerTask - 1) / kGroupsPerTask;
  if (w.packed) return (w.rows / 8 + kGroupsPerTask - 1) / kGroupsPerTask + (w.rows % 8 ? 1 : 0);
  return (w.rows + kRowsPerTask - 1) / kRowsPerTask;
}

void StreamTask(const float* x, const float* xi, int64_t m, const WeightMatrix& w, float* y,
                bool accumulate, int64_t t) {
  if (w.type == WeightType::kQ8) {
    const int64_t groups = (w.rows + 7) / 8;
    Q8StreamGroups(x, m, static_cast<const uint8_t*>(w.data), w.rows, w.cols, y, accumulate,
                   t * kGroupsPerTask, std::min(groups, (t + 1) * kGroupsPerTask));
  } else if (w.packed) {
    const int64_t groups = w.rows / 8;
    const int64_t g0 = t * kGroupsPerTask;
    if (g0 < groups) {
      StreamPackedGroups(x, xi, m, w, y, accumulate, g0, std::min(groups, g0 + kGroupsPerTask));
    } else {  // the rows after the last full group are stored row-major
      StreamBlock<WeightType::kBF16>(x, m, w, y, accumulate, groups * 8, w.rows);
    }
  } else {
    const int64_t n0 = t * kRowsPerTask, n1 = std::min(w.rows, n0 + kRowsPerTask);
    if (w.type == WeightType::kF32) {
      StreamBlock<WeightType::kF32>(x, m, w, y, accumulate, n0, n1);
    } else {
      StreamBlock<WeightType::kBF16>(x, m, w, y, accumulate, n0, n1);
    }
  }
}

// Below this many multiply-adds a product runs on the calling thread alone.
constexpr int64_t kParallelWork = int64_t{1} << 16;

// The streaming products of several matrices over the same input rows as one parallel loop, so
// the threads meet once for all of them instead of once per matrix.
void StreamEach(const float* x, int64_t m, absl::Span<const LinearOutput> outputs, bool accumulate,
                std::vector<float>* scratch) {
  int64_t tasks = 0, work = 0;
  for (const LinearOutput& out : outputs) {
    tasks += StreamTasks(*out.w);
    work += out.w->rows * out.w->cols * m;
  }
  const float* xi = nullptr;
#if defined(YOCO_AVX2) && !defined(__AVX512F__)
  // Once for all the matrices: m·k/8 permutes against their m·k·n/8 FMAs.
  if (std::any_of(outputs.begin(), outputs.end(),
                  [](const LinearOutput& o) { return o.w->packed; })) {
    const int64_t k = outputs[0].w->cols;
    if (static_cast<int64_t>(scratch->size()) < m * k) scratch->resize(m * k);
    InterleavePairs(x, m, k, scratch->data());
    xi = scratch->data();
  }
#endif
#pragma omp parallel for schedule(static) if (work >= kParallelWork)
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t local = t;
    size_t i = 0;
    while (local >= StreamTasks(*outputs[i].w)) local -= StreamTasks(*outputs[i++].w);
    StreamTask(x, xi, m, *outputs[i].w, outputs[i].y, accumulate, local);
  }
}

// y[r, i] (+)= yt[i, r] for i < rows, r < m; y's rows are ldy apart.
void TransposeInto(const float* yt, int64_t rows, int64_t m, float* y, int64_t ldy,
                   bool accumulate) {
  for (int64_t r = 0; r < m; ++r) {
    float* yr = y + r * ldy;
    for (int64_t i = 0; i < rows; ++i) {
      yr[i] = accumulate ? yr[i] + yt[i * m + r] : yt[i * m + r];
    }
  }
}

// Products beyond the streaming kernel's rows, taken in the transposed form: the widened rows of
// all the matrices, back to back, go through sgemm a block at a time.
void WidenedEach(const float* x, int64_t m, absl::Span<const LinearOutput> outputs, bool accumulate,
                 std::vector<float>* scratch) {
  int64_t total = 0;
  for (const LinearOutput& out : outputs) total += out.w->rows;
  const int64_t k = outputs[0].w->cols;
  const int64_t block = std::min(kWidenBlockRows, total);
  if (static_cast<int64_t>(scratch->size()) < block * (k + m)) scratch->resize(block * (k + m));
  float* wide = scratch->data();
  float* yt = wide + block * k;
  for (int64_t n0 = 0; n0 < total; n0 += block) {
    const int64_t nb = std::min(block, total - n0);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nb; ++r) {
      int64_t row = n0 + r;
      size_t i = 0;
      while (row >= outputs[i].w->rows) row -= outputs[i++].w->rows;
      outputs[i].w->RowToFloat(row, wide + r * k);
    }
    Gemm(false, true, nb, m, k, 1.0f, wide, k, x, k, 0.0f, yt, m);
    int64_t first = 0;  // matrix i's first row in the concatenation
    for (const LinearOutput& out : outputs) {
      const int64_t begin = std::max(first, n0), end = std::min(first + out.w->rows, n0 + nb);
      if (begin < end) {
        TransposeInto(yt + (begin - n0) * m, end - begin, m, out.y + (begin - first), out.w->rows,
                      accumulate);
      }
      first += out.w->rows;
    }
  }
}

}  // namespace

void PackBf16Rows(const uint16_t* src, int64_t rows, int64_t cols, uint16_t* dst) {
  const int64_t groups = rows / 8;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < cols; c += 8) {
      for (int64_t j = 0; j < 8; ++j) {
        std::memcpy(dst + g * 8 * cols + c * 8 + j * 8, src + (g * 8 + j) * cols + c,
                    8 * sizeof(uint16_t));
      }
    }
  }
  std::memcpy(dst + groups * 8 * cols, src + groups * 8 * cols,
              (rows - groups * 8) * cols * sizeof(uint16_t));
}

void WeightMatrix::RowToFloat(int64_t r, float* out) const {
  if (type == WeightType::kQ8) {
    Q8RowToFloat(static_cast<const uint8_t*>(data), cols, r, out);
    return;
  }
  if (type == WeightType::kF32) {
    std::memcpy(out, static_cast<const float*>(data) + r * cols, cols * sizeof(float));
    return;
  }
  if (packed && r < rows / 8 * 8) {
    const uint16_t* row = static_cast<const uint16_t*>(data) + (r / 8) * 8 * cols + (r % 8) * 8;
    for (int64_t c = 0; c < cols; c += 8) {
#ifdef YOCO_AVX2
      _mm256_storeu_ps(out + c, LoadBf16x8(row + c * 8));
#else
      for (int64_t i = 0; i < 8; ++i) out[c + i] = WeightAt<WeightType::kBF16>(row + c * 8, i);
#endif
    }
    return;
  }
  const uint16_t* row = static_cast<const uint16_t*>(data) + r * cols;
  int64_t i = 0;
#ifdef YOCO_AVX2
  for (; i + 8 <= cols; i += 8) _mm256_storeu_ps(out + i, LoadBf16x8(row + i));
#endif
  for (; i < cols; ++i) out[i] = WeightAt<WeightType::kBF16>(row, i);
}

void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
            std::vector<float>* scratch) {
  if (m == 0) return;
  const int64_t k = w.cols, n = w.rows;
  if (m <= StreamingRows(w)) {
    const LinearOutput out{&w, y};
    StreamEach(x, m, {&out, 1}, accumulate, scratch);
    return;
  }
  const bool transposed = m <= kTransposedRows;
  if (w.type == WeightType::kF32) {
    const float* wf = static_cast<const float*>(w.data);
    if (!transposed) {
      Gemm(false, true, m, n, k, 1.0f, x, k, wf, k, accumulate ? 1.0f : 0.0f, y, n);
      return;
    }
    if (static_cast<int64_t>(scratch->size()) < n * m) scratch->resize(n * m);
    Gemm(false, true, n, m, k, 1.0f, wf, k, x, k, 0.0f, scratch->data(), m);
    TransposeInto(scratch->data(), n, m, y, n, accumulate);
    return;
  }
  if (transposed) {
    const LinearOutput out{&w, y};
    WidenedEach(x, m, {&out, 1}, accumulate, scratch);
    return;
  }
  const int64_t block = std::min(kWidenBlockRows, n);
  if (static_cast<int64_t>(scratch->size()) < block * k) scratch->resize(block * k);
  float* wide = scratch->data();
  for (int64_t n0 = 0; n0 < n; n0 += block) {
    const int64_t nb = std::min(block, n - n0);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nb; ++r) w.RowToFloat(n0 + r, wide + r * k);
    Gemm(false, true, m, nb, k, 1.0f, x, k, wide, k, accumulate ? 1.0f : 0.0f, y + n0, n);
  }
}

void FusedLinear(const float* x, int64_t m, absl::Span<const LinearOutput> outputs,
                 std::vector<float>* scratch) {
  if (m == 0) return;
  constexpr size_t kMax = 8;  // sorted on the stack: a decode step allocates nothing here
  if (outputs.size() > kMax) {
    FusedLinear(x, m, outputs.subspan(0, kMax), scratch);
    FusedLinear(x, m, outputs.subspan(kMax), scratch);
    return;
  }
  // Each matrix goes where Linear would send it; those that meet in a path share its pass.
  // fp32 weights are not widened, and many input rows take the plain sgemm form: those run one
  // by one.
  LinearOutput streamed[kMax], widened[kMax];
  size_t n_streamed = 0, n_widened = 0;
  for (const LinearOutput& out : outputs) {
    if (m <= StreamingRows(*out.w)) {
      streamed[n_streamed++] = out;
    } else if (out.w->type != WeightType::kF32 && m <= kTransposedRows) {
      widened[n_widened++] = out;
    } else {
      Linear(x, m, *out.w, out.y, false, scratch);
    }
  }
  if (n_streamed > 0) StreamEach(x, m, {streamed, n_streamed}, /*accumulate=*/false, scratch);
  if (n_widened > 0) WidenedEach(x, m, {widened, n_widened}, /*accumulate=*/false, scratch);
}

}  // namespace yoco::cpu
