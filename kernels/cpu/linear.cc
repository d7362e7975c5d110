// Two regimes. Few rows (decode batches; with AVX-512, up to 256 rows of packed bf16 or q8): a
// streaming kernel reads each weight row once per call and applies it to every input
// row, so a step costs one pass over the weights. Many rows (prefill): fp32 weights go straight
// to sgemm; bf16 and q8 weights are widened a block of rows at a time, a cost amortised over the
// m input rows.
#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cmath>
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
// Up to this many input rows an fp32 product is taken as yᵀ = W·xᵀ: oneDNN's sgemm runs that
// form 1.1-5x faster than y = x·Wᵀ when x has few rows (measured at 32-256 rows, k = 768 and
// 2048: 345-363 against 52-231 GFLOP/s at 32-64 rows), and the transpose back costs m·n moves.
constexpr int64_t kTransposedRows = 256;
// Up to this many input rows the widened products of several matrices share their sgemm calls
// (FusedLinear); beyond, each matrix's product is large enough alone and writes its output in
// place.
constexpr int64_t kSharedWidenRows = 256;
constexpr int64_t kRowsPerTask = 32;  // weight rows per parallel task

}  // namespace

// With AVX-512 the packed bf16 groups keep the register tiles fed from L1 at any row count:
// 304-313 GFLOP/s at 16-256 rows against widening + sgemm's 183-280 (a layer's projections,
// 12.6 MB of bf16, 2 threads; measured with the packed layout before the present one, which is
// 15-30% faster from 8 rows); q8 groups alike (40 products 2048×768, 2 threads: 33 rows 11.2
// against 16.9 ms, 64 rows 21.2 against 24.7, 128-256 rows within 5% either way); fp32 rows (no
// packing) fall to a quarter of sgemm's rate past 8. Matrices of fewer rows than a group (a
// layer's decay-gate logits) cost nothing either way and stream with the packed ones, so that a
// whole model is streamed alike. With AVX2 alone the packed bf16 and q8 tiles beat widening + an
// AVX2 sgemm up to 32 rows (126 MB of bf16, 2 threads, oneDNN held to AVX2: 16 rows 13.5-14.0
// against 17.8-19.2 ms, 32 rows 24.4-24.8 against 28.2-29.0; q8, 16 rows: 11.6 against 17.8),
// but not an AVX-512 sgemm, which oneDNN picks at run time on an AVX-512 CPU whatever this
// build's -march (bf16: 9 rows 8.0-8.7 against 11.4-11.7 ms, 16 rows 13.7 against 12.4-12.6, 32
// rows 24.4-26.1 against 17.7-18.1; q8: 12 rows 9.3 against 10.5, 16 rows 12.8 against 11.7), so
// there the tiles take up to 12 rows. A matrix of fewer rows than a packed group streams wherever
// packed ones do: up to these rows a row's result does not depend on how many rows came with it.
int64_t StreamingRows(const WeightMatrix& w) {
  [[maybe_unused]] const bool grouped =
      w.packed || w.type == WeightType::kQ8 || w.rows < kPackedGroupRows;
#if defined(__AVX512F__)
  if (grouped) return kTransposedRows;
#elif defined(YOCO_AVX2)
  static const bool sgemm_has_avx512 = __builtin_cpu_supports("avx512f");
  if (grouped) return sgemm_has_avx512 ? 12 : 32;
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

#if defined(__AVX512F__)
template <WeightType kType>
inline __m512 LoadWeights16(const void* row, int64_t i) {
  if constexpr (kType == WeightType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
#endif

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

// y[r, n0 + j] for r < M, j < NB: a register tile of M input rows × NB row-major weight rows.
template <WeightType kType, int M, int NB>
inline void Tile(const float* x, int64_t ldx, const WeightMatrix& w, int64_t n0, float* y,
                 bool accumulate) {
  const int64_t k = w.cols;
  const void* rows[NB];
  for (int j = 0; j < NB; ++j) rows[j] = WeightRow<kType>(w, n0 + j);
  float sums[M][NB];
  int64_t i = 0;
#ifdef YOCO_AVX2
  __m256 acc[M][NB];
#if defined(__AVX512F__)
  // Sixteen columns a step where vectors are that wide (twice the work per instruction), folded
  // into the eight-lane sums for the rest: the same operations for a row in any tile, so still
  // the same bits alone as in any batch.
  {
    __m512 wide[M][NB];
    for (int r = 0; r < M; ++r)
      for (int j = 0; j < NB; ++j) wide[r][j] = _mm512_setzero_ps();
    for (; i + 16 <= k; i += 16) {
      __m512 wv[NB];
      for (int j = 0; j < NB; ++j) wv[j] = LoadWeights16<kType>(rows[j], i);
      for (int r = 0; r < M; ++r) {
        const __m512 xv = _mm512_loadu_ps(x + r * ldx + i);
        for (int j = 0; j < NB; ++j) wide[r][j] = _mm512_fmadd_ps(wv[j], xv, wide[r][j]);
      }
    }
    for (int r = 0; r < M; ++r)
      for (int j = 0; j < NB; ++j)
        acc[r][j] = _mm256_add_ps(
            _mm512_castps512_ps256(wide[r][j]),
            _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(wide[r][j]), 1)));
  }
#else
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < NB; ++j) acc[r][j] = _mm256_setzero_ps();
#endif
  for (; i + 8 <= k; i += 8) {
    __m256 wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = LoadWeights8<kType>(rows[j], i);
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
  // The columns after the last 8 by explicit FMAs: a row's result is then the same bits in any
  // tile, where the compiler's contraction of a * b + c depends on how it vectorises the tile.
  for (; i < k; ++i) {
    for (int j = 0; j < NB; ++j) {
      const float wi = WeightAt<kType>(rows[j], i);
      for (int r = 0; r < M; ++r) sums[r][j] = std::fma(wi, x[r * ldx + i], sums[r][j]);
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

// The packed bf16 tiles (see WeightMatrix::packed for the layout). A column pair of a group is
// 128 bytes: in each 32-bit lane a row's two columns, so one shift of the lanes left by 16 gives
// the rows' even column in fp32 and clearing their low halves the odd one, where widening 8
// values that sat in one row took a shuffle and a shift. A vector of the widened column holds
// one value of 16 (8 with AVX2) output rows, multiplied by one input value broadcast from
// memory (a load, not a shuffle), and its lanes are whole results: no sums across lanes at the
// end. Every output is one FMA chain over the columns in order, whatever the tile, the number of
// input rows or the vector width: the same bits for a row alone as in any batch, in AVX2 and
// AVX-512 builds alike.
//
// Against the layout it replaced (groups of 8 rows in 8-column chunks, each tile widening its
// chunk with a shuffle and a shift and summing its lanes at the end), one thread's 6-row tile in
// L1: 184 -> 216 GFLOP/s. 40 products 2048×768 (126 MB of bf16), 2 threads, AVX-512, alternating
// runs, ms: 1 row 1.83-1.87 -> 1.83-1.85, 2 rows 1.67 -> 1.71-1.77, 3 rows 2.2 -> 1.8-1.9, 4 rows
// 2.0-2.5 -> 2.1-2.3, 8 rows 4.0-4.1 -> 2.7, 16 rows 6.7-6.9 -> 5.3-5.7, 32 rows 12.4-13.9 ->
// 10.6-11.3, 64 rows 23.6-23.8 -> 20.1-20.3. AVX2 build (x86-64-v3): 1 and 8 rows the same, 3 rows
// 5.1-5.8 -> 4.0-4.5.

// Two lines a column pair: the tiles ask for the pair they will read next while they compute.
[[gnu::always_inline]] inline void PrefetchPair(const uint16_t* pair) {
#ifdef YOCO_AVX2
  _mm_prefetch(reinterpret_cast<const char*>(pair), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(pair + 32), _MM_HINT_T0);
#else
  (void)pair;  // without AVX2, prefetching is left to the hardware
#endif
}

// The tile that reads weights from memory (the first over a group) asks for the lines this far
// ahead of those it reads (elements; at a group's end, the next group's first): left to the
// hardware prefetcher, the reads and the arithmetic do not overlap. 40 products 2048×768, 2
// threads: one row (two groups at once) 2.1-2.8 ms without, 1.8 at 4 KB ahead (2.1 at 8-12 KB);
// 4 rows 2.5-2.8 at 4 KB, 1.8 at 12 KB, 3.9 when the first tile asked for the whole next group
// in L1 (4.5 at 768×2048, whose 128 KB groups overrun L1); 8 and 32 rows: the same either way.
constexpr int64_t kPairPrefetchAhead = 2048;
constexpr int64_t kGroupPrefetchAhead = 6144;

#if defined(__AVX512F__)
// Lines a tile asks to have in L2 while it computes from L2: a part of the group the next tile
// over it will read from memory. `step` bytes a column pair, one line at a time (two where the
// step passes a line).
struct GroupPrefetch {
  const char* at = nullptr;
  int64_t step = 0;
};

// M input rows (k apart) against all 32 rows of G adjacent packed groups; y (their outputs) has
// rows ldy apart. With `ahead` > 0 the tile asks for the lines that far ahead of each column pair
// it reads; with `next`, for those lines into L2. The same bits for any M and G.
template <int M, int G>
inline void PackedGroupTile(const float* x, int64_t k, const uint16_t* group, float* y, int64_t ldy,
                            bool accumulate, int64_t ahead, GroupPrefetch next = {}) {
  const __m512i high_halves = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 acc[M][2 * G];
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < 2 * G; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < k; c += 2) {
    __m512 even[2 * G], odd[2 * G];
    for (int s = 0; s < G; ++s) {
      const uint16_t* pair = group + s * kPackedGroupRows * k + c * kPackedGroupRows;
      if (ahead > 0) PrefetchPair(pair + ahead);
      if (next.at != nullptr) {
        _mm_prefetch(next.at, _MM_HINT_T1);
        if (next.step > 64) _mm_prefetch(next.at + 64, _MM_HINT_T1);
        next.at += next.step;
      }
      for (int h = 0; h < 2; ++h) {
        const __m512i v = _mm512_loadu_si512(pair + h * 32);
        even[2 * s + h] = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, v, 16));
        odd[2 * s + h] = _mm512_castsi512_ps(_mm512_and_si512(v, high_halves));
      }
    }
    for (int r = 0; r < M; ++r) {
      const __m512 xa = _mm512_set1_ps(x[r * k + c]);
      const __m512 xb = _mm512_set1_ps(x[r * k + c + 1]);
      for (int j = 0; j < 2 * G; ++j) {
        acc[r][j] = _mm512_fmadd_ps(even[j], xa, acc[r][j]);
        acc[r][j] = _mm512_fmadd_ps(odd[j], xb, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int j = 0; j < 2 * G; ++j) {
      float* yr = y + r * ldy + 16 * j;
      _mm512_storeu_ps(yr, accumulate ? _mm512_add_ps(_mm512_loadu_ps(yr), acc[r][j]) : acc[r][j]);
    }
  }
}

// PackedGroupTile<rows, G> for 0 < rows <= Max.
template <int Max, int G>
inline void PackedGroupTileOf(int64_t rows, const float* x, int64_t k, const uint16_t* group,
                              float* y, int64_t ldy, bool accumulate, int64_t ahead) {
  if constexpr (Max > 0) {
    if (rows == Max) {
      PackedGroupTile<Max, G>(x, k, group, y, ldy, accumulate, ahead);
    } else {
      PackedGroupTileOf<Max - 1, G>(rows, x, k, group, y, ldy, accumulate, ahead);
    }
  }
}
#elif defined(YOCO_AVX2)
// M input rows against the B 8-row blocks of a packed group from block b0 (a ymm holds a block's
// column pair); y points at the group's first output; `ahead` as for the AVX-512 tile.
template <int M, int B>
inline void PackedBlockTile(const float* x, int64_t k, const uint16_t* group, int b0, float* y,
                            int64_t ldy, bool accumulate, int64_t ahead) {
  const __m256i high_halves = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 acc[M][B];
  for (int r = 0; r < M; ++r)
    for (int b = 0; b < B; ++b) acc[r][b] = _mm256_setzero_ps();
  for (int64_t c = 0; c < k; c += 2) {
    const uint16_t* pair = group + c * kPackedGroupRows;
    if (ahead > 0) PrefetchPair(pair + ahead);
    __m256 even[B], odd[B];
    for (int b = 0; b < B; ++b) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + (b0 + b) * 16));
      even[b] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      odd[b] = _mm256_castsi256_ps(_mm256_and_si256(v, high_halves));
    }
    for (int r = 0; r < M; ++r) {
      const __m256 xa = _mm256_broadcast_ss(x + r * k + c);
      const __m256 xb = _mm256_broadcast_ss(x + r * k + c + 1);
      for (int b = 0; b < B; ++b) {
        acc[r][b] = _mm256_fmadd_ps(even[b], xa, acc[r][b]);
        acc[r][b] = _mm256_fmadd_ps(odd[b], xb, acc[r][b]);
      }
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int b = 0; b < B; ++b) {
      float* yr = y + r * ldy + 8 * (b0 + b);
      _mm256_storeu_ps(yr, accumulate ? _mm256_add_ps(_mm256_loadu_ps(yr), acc[r][b]) : acc[r][b]);
    }
  }
}
#endif

// Input rows [0, m) against the packed groups [g0, g1) of a packed bf16 matrix.
void StreamPackedGroups(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
                        int64_t g0, int64_t g1) {
  const int64_t k = w.cols;
  const uint16_t* base = static_cast<const uint16_t*>(w.data);
  for (int64_t g = g0; g < g1; ++g) {
    const uint16_t* group = base + g * kPackedGroupRows * k;
    float* yg = y + g * kPackedGroupRows;
    // The first tile reads the group from memory and asks for what follows; the others find it
    // in L2.
    int64_t ahead = kGroupPrefetchAhead;
#if defined(__AVX512F__)
    // Up to 3 rows, two groups at a time (where the task has two left): the tile reads the
    // weights from memory, which a group's few FMA chains alone do not keep up with (40 products
    // 2048×768, 2 threads, one row: 2.1-2.8 ms a group at a time, 1.8-1.9 two at a time).
    if (m <= 3 && g + 1 < g1) {
      PackedGroupTileOf<3, 2>(m, x, k, group, yg, w.rows, accumulate, kPairPrefetchAhead);
      ++g;
      continue;
    }
    // Eight rows a tile (16 accumulators), the rest in one tile: a tile of few rows over a group
    // in L2 waits on its FMA chains (5 rows as 4 + 1: 3.0 ms against 2.7 with the layout before).
    // Only the first tile over a group reads it from memory; the second to fourth bring the next
    // group into L2 between them, so that the memory works while they compute (40 products
    // 2048×768 at 32 rows, 2 threads: 10.7-10.9 -> 10.2 ms; 768×768: 8.4-8.5 -> 7.8-8.1).
    const int64_t tiles = m / 8;
    const int64_t spreaders = std::min<int64_t>(tiles - 1, 3);
    const bool spread = spreaders > 0 && g + 1 < w.rows / kPackedGroupRows;
    const int64_t group_bytes = kPackedGroupRows * k * int64_t{sizeof(uint16_t)};
    const int64_t share = spread ? (group_bytes / spreaders + 63) / 64 * 64 : 0;  // whole lines
    const char* next = reinterpret_cast<const char*>(group) + group_bytes;
    int64_t r = 0;
    for (int64_t t = 0; r + 8 <= m; r += 8, ahead = 0, ++t) {
      GroupPrefetch prefetch;
      if (spread && t >= 1 && t <= spreaders) {
        prefetch = {next + (t - 1) * share, share / (k / 2)};
      }
      PackedGroupTile<8, 1>(x + r * k, k, group, yg + r * w.rows, w.rows, accumulate, ahead,
                            prefetch);
    }
    PackedGroupTileOf<7, 1>(m - r, x + r * k, k, group, yg + r * w.rows, w.rows, accumulate, ahead);
#elif defined(YOCO_AVX2)
    // Four rows a tile over two blocks (8 accumulators, 14 registers of 16), what is left over the
    // whole group in one pass (2 rows as tiles over two blocks: 4.0 ms, over four: 3.0-3.2, the
    // layout before 2.8-3.2).
    for (int b0 = 0; b0 < 4 && m >= 4; b0 += 2) {
      for (int64_t r = 0; r + 4 <= m; r += 4, ahead = 0) {
        PackedBlockTile<4, 2>(x + r * k, k, group, b0, yg + r * w.rows, w.rows, accumulate, ahead);
      }
    }
    int64_t r = m / 4 * 4;
    for (; r + 2 <= m; r += 2, ahead = 0) {
      PackedBlockTile<2, 4>(x + r * k, k, group, 0, yg + r * w.rows, w.rows, accumulate, ahead);
    }
    for (; r < m; ++r, ahead = 0) {
      PackedBlockTile<1, 4>(x + r * k, k, group, 0, yg + r * w.rows, w.rows, accumulate, ahead);
    }
#else
    (void)ahead;
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < kPackedGroupRows; ++j) {
        float sum = 0.0f;
        for (int64_t c = 0; c < k; ++c) {
          sum += WeightAt<WeightType::kBF16>(group, PackedIndex(j, c)) * x[r * k + c];
        }
        float& out = yg[r * w.rows + j];
        out = accumulate ? out + sum : sum;
      }
    }
#endif
  }
}

// The streaming kernel's unit of parallel work: kRowsPerTask weight rows of one matrix, two
// groups of a packed bf16 or q8 matrix (few input rows stream them together), and a packed matrix's
// rows after its last full group are one more task. How the rows are split changes no result:
// every row's sums run the same way in any task.
constexpr int64_t kQ8GroupsPerTask = 2;
constexpr int64_t kPackedGroupsPerTask = 2;

int64_t StreamTasks(const WeightMatrix& w) {
  if (w.type == WeightType::kQ8)
    return (Q8Groups(w.rows) + kQ8GroupsPerTask - 1) / kQ8GroupsPerTask;
  if (w.packed) {
    return (w.rows / kPackedGroupRows + kPackedGroupsPerTask - 1) / kPackedGroupsPerTask +
           (w.rows % kPackedGroupRows ? 1 : 0);
  }
  return (w.rows + kRowsPerTask - 1) / kRowsPerTask;
}

void StreamTask(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
                int64_t t) {
  if (w.type == WeightType::kQ8) {
    Q8StreamGroups(x, m, static_cast<const uint8_t*>(w.data), w.rows, w.cols, y, accumulate,
                   t * kQ8GroupsPerTask, std::min(Q8Groups(w.rows), (t + 1) * kQ8GroupsPerTask));
  } else if (w.packed) {
    const int64_t groups = w.rows / kPackedGroupRows;
    const int64_t g0 = t * kPackedGroupsPerTask;
    if (g0 < groups) {
      StreamPackedGroups(x, m, w, y, accumulate, g0, std::min(groups, g0 + kPackedGroupsPerTask));
    } else {  // the rows after the last full group are stored row-major
      StreamBlock<WeightType::kBF16>(x, m, w, y, accumulate, groups * kPackedGroupRows, w.rows);
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
void StreamEach(const float* x, int64_t m, absl::Span<const LinearOutput> outputs,
                bool accumulate) {
  int64_t tasks = 0, work = 0;
  for (const LinearOutput& out : outputs) {
    tasks += StreamTasks(*out.w);
    work += out.w->rows * out.w->cols * m;
  }
#pragma omp parallel for schedule(static) if (work >= kParallelWork)
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t local = t;
    size_t i = 0;
    while (local >= StreamTasks(*outputs[i].w)) local -= StreamTasks(*outputs[i++].w);
    StreamTask(x, m, *outputs[i].w, outputs[i].y, accumulate, local);
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

// Rows [r0, r1) of w widened to fp32 as columns, out[c * ld + (r - r0)], the form of a block
// that sgemm reads as easily as rows and a packed group widens to without a transpose: a column
// pair of 8 rows is one load, a shift and a mask, and two stores of 8 outputs; q8 groups alike
// (Q8WidenColumns). The rest (row-major tails) go through RowToFloat (`row`: cols floats).
void WidenColumns(const WeightMatrix& w, int64_t r0, int64_t r1, float* out, int64_t ld,
                  float* row) {
  const int64_t k = w.cols;
  if (w.type == WeightType::kQ8) {
    Q8WidenColumns(static_cast<const uint8_t*>(w.data), k, r0, r1, out, ld);
    return;
  }
  for (int64_t r = r0; r < r1;) {
    const int64_t group_end = r + kPackedGroupRows;
    if (w.packed && r % kPackedGroupRows == 0 &&
        group_end <= std::min(r1, w.rows / kPackedGroupRows * kPackedGroupRows)) {
      const uint16_t* group = static_cast<const uint16_t*>(w.data) + r * k;
      float* o = out + (r - r0);
      for (int64_t c = 0; c < k; c += 2) {
#ifdef YOCO_AVX2
        const uint16_t* pair = group + PackedIndex(0, c);
        const __m256i high_halves = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
        for (int j = 0; j < kPackedGroupRows; j += 8) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 2 * j));
          _mm256_storeu_ps(o + c * ld + j, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
          _mm256_storeu_ps(o + (c + 1) * ld + j,
                           _mm256_castsi256_ps(_mm256_and_si256(v, high_halves)));
        }
#else
        for (int j = 0; j < kPackedGroupRows; ++j) {
          o[c * ld + j] = WeightAt<WeightType::kBF16>(group, PackedIndex(j, c));
          o[(c + 1) * ld + j] = WeightAt<WeightType::kBF16>(group, PackedIndex(j, c + 1));
        }
#endif
      }
      r = group_end;
      continue;
    }
    w.RowToFloat(r, row);
    for (int64_t c = 0; c < k; ++c) out[c * ld + (r - r0)] = row[c];
    ++r;
  }
}

// The leading dimension of a widened block of n rows held as columns: a few floats more than n,
// because at a multiple of 4 KB the stores of one column pair after the next all land in the
// same L1 sets (the block of 1024 rows widened 2.2x slower than row by row).
inline int64_t WidenedColumnStride(int64_t n) { return n + 16; }

// Products beyond the streaming kernel's rows: the widened rows of all the matrices, back to
// back, go through sgemm a block at a time, as y = x · W_block with the block held as columns
// (WidenColumns; oneDNN runs this form faster than yᵀ = W_block · xᵀ over rows, which it used to
// take for few input rows: 40 products 2048×768, 2 threads, AVX2 build, 16 rows 15.8 -> 11.1 ms,
// 32 rows 20.7 -> 17.8). One matrix's block is written in place; several matrices' blocks are
// copied out.
void WidenedEach(const float* x, int64_t m, absl::Span<const LinearOutput> outputs, bool accumulate,
                 std::vector<float>* scratch) {
  int64_t total = 0;
  for (const LinearOutput& out : outputs) total += out.w->rows;
  const int64_t k = outputs[0].w->cols;
  const int64_t block = std::min(kWidenBlockRows, total);
  const int64_t ld = WidenedColumnStride(block);
  const int64_t out_floats = outputs.size() == 1 ? 0 : m * block;
  if (static_cast<int64_t>(scratch->size()) < ld * k + out_floats) {
    scratch->resize(ld * k + out_floats);
  }
  float* wide = scratch->data();
  float* yb = wide + ld * k;  // [m, nb] of several matrices
  // A block's rows as pieces of one matrix, cut at its 32-row groups: the parallel loop's unit.
  struct Piece {
    const WeightMatrix* w;
    int64_t r0, r1;  // the matrix's rows
    int64_t at;      // the first row's place in the block
  };
  std::vector<Piece> pieces;
  for (int64_t n0 = 0; n0 < total; n0 += block) {
    const int64_t nb = std::min(block, total - n0);
    pieces.clear();
    int64_t first = 0;  // matrix i's first row in the concatenation
    for (const LinearOutput& out : outputs) {
      const int64_t begin = std::max(first, n0), end = std::min(first + out.w->rows, n0 + nb);
      for (int64_t r = begin - first; r < end - first;) {
        const int64_t next = std::min(end - first, (r / kPackedGroupRows + 1) * kPackedGroupRows);
        pieces.push_back({out.w, r, next, first + r - n0});
        r = next;
      }
      first += out.w->rows;
    }
#pragma omp parallel
    {
      std::vector<float> row(k);
#pragma omp for schedule(static)
      for (size_t i = 0; i < pieces.size(); ++i) {
        const Piece& p = pieces[i];
        WidenColumns(*p.w, p.r0, p.r1, wide + p.at, ld, row.data());
      }
    }
    if (outputs.size() == 1) {
      const LinearOutput& out = outputs[0];
      Gemm(false, false, m, nb, k, 1.0f, x, k, wide, ld, accumulate ? 1.0f : 0.0f, out.y + n0,
           out.w->rows);
      continue;
    }
    Gemm(false, false, m, nb, k, 1.0f, x, k, wide, ld, 0.0f, yb, nb);
    first = 0;
    for (const LinearOutput& out : outputs) {
      const int64_t begin = std::max(first, n0), end = std::min(first + out.w->rows, n0 + nb);
      for (int64_t r = 0; begin < end && r < m; ++r) {
        const float* src = yb + r * nb + (begin - n0);
        float* dst = out.y + r * out.w->rows + (begin - first);
        for (int64_t i = 0; i < end - begin; ++i) dst[i] = accumulate ? dst[i] + src[i] : src[i];
      }
      first += out.w->rows;
    }
  }
}

}  // namespace

void PackBf16Rows(const uint16_t* src, int64_t rows, int64_t cols, uint16_t* dst) {
  const int64_t packed_rows = rows / kPackedGroupRows * kPackedGroupRows;
  for (int64_t r = 0; r < packed_rows; ++r) {
    uint16_t* group = dst + (r / kPackedGroupRows) * kPackedGroupRows * cols;
    for (int64_t c = 0; c < cols; ++c) {
      group[PackedIndex(r % kPackedGroupRows, c)] = src[r * cols + c];
    }
  }
  std::memcpy(dst + packed_rows * cols, src + packed_rows * cols,
              (rows - packed_rows) * cols * sizeof(uint16_t));
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
  if (packed && r < rows / kPackedGroupRows * kPackedGroupRows) {
    const uint16_t* group =
        static_cast<const uint16_t*>(data) + (r / kPackedGroupRows) * kPackedGroupRows * cols;
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = WeightAt<WeightType::kBF16>(group, PackedIndex(r % kPackedGroupRows, c));
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

// The products of `outputs` for m rows, streamed `block` rows at a time.
void StreamInBlocks(const float* x, int64_t m, absl::Span<const LinearOutput> outputs,
                    bool accumulate, int64_t block) {
  constexpr size_t kMax = 8;
  LinearOutput shifted[kMax];
  const int64_t k = outputs[0].w->cols;
  for (int64_t r = 0; r < m; r += block) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      shifted[i] = {outputs[i].w, outputs[i].y + r * outputs[i].w->rows};
    }
    StreamEach(x + r * k, std::min(block, m - r), {shifted, outputs.size()}, accumulate);
  }
}

void Linear(const float* x, int64_t m, const WeightMatrix& w, float* y, bool accumulate,
            std::vector<float>* scratch, RowArithmetic arithmetic) {
  if (m == 0) return;
  const int64_t k = w.cols, n = w.rows;
  if (m <= StreamingRows(w)) {
    const LinearOutput out{&w, y};
    StreamEach(x, m, {&out, 1}, accumulate);
    return;
  }
  if (arithmetic == RowArithmetic::kPerRow) {
    const LinearOutput out{&w, y};
    StreamInBlocks(x, m, {&out, 1}, accumulate, StreamingRows(w));
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
  const LinearOutput out{&w, y};
  WidenedEach(x, m, {&out, 1}, accumulate, scratch);
}

void FusedLinear(const float* x, int64_t m, absl::Span<const LinearOutput> outputs,
                 std::vector<float>* scratch, RowArithmetic arithmetic) {
  if (m == 0) return;
  constexpr size_t kMax = 8;  // sorted on the stack: a decode step allocates nothing here
  if (outputs.size() > kMax) {
    FusedLinear(x, m, outputs.subspan(0, kMax), scratch, arithmetic);
    FusedLinear(x, m, outputs.subspan(kMax), scratch, arithmetic);
    return;
  }
  if (arithmetic == RowArithmetic::kPerRow) {
    // Blocks as large as every matrix streams, so they still share one pass per block.
    int64_t block = m;
    for (const LinearOutput& out : outputs) block = std::min(block, StreamingRows(*out.w));
    StreamInBlocks(x, m, outputs, /*accumulate=*/false, block);
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
    } else if (out.w->type != WeightType::kF32 && m <= kSharedWidenRows) {
      widened[n_widened++] = out;
    } else {
      Linear(x, m, *out.w, out.y, false, scratch);
    }
  }
  if (n_streamed > 0) StreamEach(x, m, {streamed, n_streamed}, /*accumulate=*/false);
  if (n_widened > 0) WidenedEach(x, m, {widened, n_widened}, /*accumulate=*/false, scratch);
}

}  // namespace yoco::cpu
