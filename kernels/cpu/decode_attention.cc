// Flash-decoding on the CPU: each task computes, per head, the max score m, the sum l of
// exp(s − m) and the unnormalised Σ exp(s − m)·v over its key range; a merge rescales the
// ranges to a common max.
#include "kernels/cpu/decode_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {
namespace {

// Keys per range: a sequence's keys are always cut the same way, whatever the batch, so its
// output is the same bits in any batch.
constexpr int64_t kKeysPerRange = 512;
static_assert(kKeysPerRange % kKeyLaneRows == 0, "a range starts at a block of keys in lanes");
// V rows per block, kept in L1 across the head sweeps; a block of values in strips.
constexpr int64_t kValueBlock = kValueStripRows;
static_assert(kKeysPerRange % kValueBlock == 0, "a range starts at a block of values in strips");
// Rows ahead whose lines are prefetched into L1. Row-major K: the hardware prefetcher alone
// leaves each core at about a third of the machine's read bandwidth (microbenchmark: batch 32 ×
// 2048 keys, 21 -> 26-30 GB/s; 64 rows measured as good as 128). V: 16 rows past the block;
// 64 rows (32 KB of bf16, 64 KB of fp32 rows) overran the 48 KB L1 that also holds the block
// and the scores (`yoco bench-attention`: 8-10% slower). Keys in lanes and values in strips are
// one address-ordered stream each, which the hardware prefetcher follows, and software
// prefetches there made them slower (keys: the K pass and softmax with the V pass skipped, one
// thread, 32K keys: 5.6 -> 4.4 ms without them; values: batch 32 x 2048 bf16, 9.8 -> 9.0 ms).
constexpr int64_t kPrefetchKeys = 64;
constexpr int64_t kPrefetchValues = 16;

// The rows a thread reads after the current pass (the range's V rows after its row-major K
// rows, the next range's K rows after its V rows): the pass's last blocks ask for them, so that
// the next pass does not start cold.
struct NextRows {
  const char* data = nullptr;
  int64_t row_bytes = 0;
  int64_t count = 0;
};

// Always inlined: GCC 12 finds a function whose only effect is a prefetch free of side effects,
// and drops every call it does not inline.
[[gnu::always_inline]] inline void PrefetchBytes(const char* p, int64_t bytes) {
#ifdef YOCO_AVX2
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
#endif
}

// A sequence's K or V rows of ld values: one array, or blocks of block_rows rows each stored
// as if they were rows 0.. of their own (DecodeQuery). In all three layouts a block of the
// layout that starts at row r starts r·ld values past the start of its storage.
template <typename T>
struct RowBlocks {
  const void* const* blocks;
  int64_t block_rows;
  int64_t ld;

  // The storage of row r's block of block_rows rows, and r's row within it.
  const T* Base(int64_t r) const { return static_cast<const T*>(blocks[r / block_rows]); }
  int64_t InBlock(int64_t r) const { return r % block_rows; }
  // Row r (in rows), or the layout's block that starts at row r (in lanes or strips).
  const T* Row(int64_t r) const { return Base(r) + InBlock(r) * ld; }
  // Rows from r to the end of its block: contiguous (in rows).
  int64_t RowsLeft(int64_t r) const { return block_rows - InBlock(r); }
};
// What an array is as RowBlocks: one block no row reaches the end of.
constexpr int64_t kOneBlock = int64_t{1} << 62;

// Asks in L1 for rows [first, first + count) of a pass over rows [begin, begin + len) (in rows),
// running on into `next` past its end.
template <typename T>
[[gnu::always_inline]] inline void PrefetchAhead(const RowBlocks<T>& rows, int64_t begin,
                                                 int64_t len, const NextRows& next, int64_t first,
                                                 int64_t count) {
  const int64_t row_bytes = rows.ld * int64_t{sizeof(T)};
  // The common case: one contiguous run of this pass's rows.
  if (first + count <= len && rows.RowsLeft(begin + first) >= count) {
    PrefetchBytes(reinterpret_cast<const char*>(rows.Row(begin + first)), count * row_bytes);
    return;
  }
  for (int64_t r = first; r < first + count; ++r) {
    if (r < len) {
      PrefetchBytes(reinterpret_cast<const char*>(rows.Row(begin + r)), row_bytes);
    } else if (r - len < next.count) {
      PrefetchBytes(next.data + (r - len) * next.row_bytes, next.row_bytes);
    }
  }
}

// K/V element loads for both storage types: fp32, and bf16 bits (uint16_t) widened exactly.
inline float LoadOne(const float* p) { return *p; }
inline float LoadOne(const uint16_t* p) {
  const uint32_t u = uint32_t{*p} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
#ifdef YOCO_AVX2
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) { return LoadBf16x8(p); }
#endif
#if defined(__AVX512F__)
inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 Load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
}
#endif

// Σ q[c]·k[c] over d values.
template <typename T>
inline float DotQK(const float* q, const T* k, int d) {
  if constexpr (std::is_same_v<T, float>) {
    return Dot(q, k, d);
  } else {
    float sum = 0.0f;
    for (int c = 0; c < d; ++c) sum += q[c] * LoadOne(k + c);
    return sum;
  }
}

#if defined(__AVX512F__)
// The 16 lane sums of v[0..15], in order: a transpose-and-add tree (45 instructions where 16
// separate reductions take ~100).
inline __m512 SumLanes16(__m512* v) {
  // Masked forms: GCC 12 warns on the plain ones (they start from an undefined register).
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 w[8];
  for (int i = 0; i < 8; ++i) {
    w[i] = _mm512_add_ps(_mm512_maskz_unpacklo_ps(kAll, v[2 * i], v[2 * i + 1]),
                         _mm512_maskz_unpackhi_ps(kAll, v[2 * i], v[2 * i + 1]));
  }
  __m512 x[4];
  for (int i = 0; i < 4; ++i) {
    x[i] = _mm512_add_ps(
        _mm512_maskz_shuffle_ps(kAll, w[2 * i], w[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
        _mm512_maskz_shuffle_ps(kAll, w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 y01 =
      _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, x[0], x[1], _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_maskz_shuffle_f32x4(kAll, x[0], x[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 y23 =
      _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, x[2], x[3], _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_maskz_shuffle_f32x4(kAll, x[2], x[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, y01, y23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_maskz_shuffle_f32x4(kAll, y01, y23, _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

// scores[h·len + i] = scale · q_h·k_{begin+i} for every query head, 16 (AVX-512) or 8 keys at
// a time so each block of whole K rows is read from memory once.
template <typename T>
void TaskScores(const GqaShape& shape, const float* q, const RowBlocks<T>& keys, int64_t begin,
                int64_t end, float scale, const NextRows& next, float* scores) {
  const int d = shape.head_dim;
  const int group = shape.q_heads / shape.kv_heads;
  const int64_t ld = int64_t{shape.kv_heads} * d;
  const int64_t len = end - begin;
  int64_t i0 = 0;
#if defined(__AVX512F__)
  if (d % 16 == 0) {
    const __m512 vscale = _mm512_set1_ps(scale);
    for (; i0 + 16 <= len; i0 += 16) {
      const T* k = keys.Row(begin + i0);  // 16 rows of one block (begin + i0 is a multiple)
      PrefetchAhead(keys, begin, len, next, i0 + kPrefetchKeys, 16);
      for (int h = 0; h < shape.q_heads; ++h) {
        const float* qh = q + int64_t{h} * d;
        const T* kh = k + int64_t{h / group} * d;
        __m512 acc[16];
        for (int kk = 0; kk < 16; ++kk) acc[kk] = _mm512_setzero_ps();
        for (int c = 0; c < d; c += 16) {
          const __m512 qv = _mm512_loadu_ps(qh + c);
          for (int kk = 0; kk < 16; ++kk)
            acc[kk] = _mm512_fmadd_ps(qv, Load16(kh + kk * ld + c), acc[kk]);
        }
        _mm512_storeu_ps(scores + h * len + i0, _mm512_mul_ps(SumLanes16(acc), vscale));
      }
    }
  }
#endif
#ifdef YOCO_AVX2
  if (d % 8 == 0) {
    const __m256 vscale = _mm256_set1_ps(scale);
    for (; i0 + 8 <= len; i0 += 8) {
      const T* k = keys.Row(begin + i0);
      PrefetchAhead(keys, begin, len, next, i0 + kPrefetchKeys, 8);
      for (int h = 0; h < shape.q_heads; ++h) {
        const float* qh = q + int64_t{h} * d;
        const T* kh = k + int64_t{h / group} * d;
        __m256 acc[8];
        for (int kk = 0; kk < 8; ++kk) acc[kk] = _mm256_setzero_ps();
        for (int c = 0; c < d; c += 8) {
          const __m256 qv = _mm256_loadu_ps(qh + c);
          for (int kk = 0; kk < 8; ++kk)
            acc[kk] = _mm256_fmadd_ps(qv, Load8(kh + kk * ld + c), acc[kk]);
        }
        const __m256 u0 =
            _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
        const __m256 u1 =
            _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
        const __m256 sum = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                         _mm256_permute2f128_ps(u0, u1, 0x31));
        _mm256_storeu_ps(scores + h * len + i0, _mm256_mul_ps(sum, vscale));
      }
    }
  }
#endif
  for (; i0 < len; ++i0) {
    const T* k = keys.Row(begin + i0);
    for (int h = 0; h < shape.q_heads; ++h) {
      scores[h * len + i0] = DotQK(q + int64_t{h} * d, k + int64_t{h / group} * d, d) * scale;
    }
  }
}

// Calls f(std::integral_constant<int, n>{}) for a count n in [1, kMax] known only at run time:
// the tiles take their row count as a template parameter, so that their accumulators are
// registers.
template <int kMax, typename F>
void WithRowCount(int n, F&& f) {
  if constexpr (kMax > 1) {
    if (n < kMax) return WithRowCount<kMax - 1>(n, std::forward<F>(f));
  }
  f(std::integral_constant<int, kMax>{});
}

// Scores of one block of keys in lanes for kRows query rows that share its KV head (heads of one
// group, of one query or of several reading the same chunk): out[j][i] = scale · q[j]·k_i for
// the block's rows i < valid, where kb is the KV head's [d][kKeyLaneRows] slice of the block. A
// row's arithmetic does not depend on the other rows, so its score is the same bits in any call.
template <int kRows, typename T>
void LaneBlockScores(const float* const* q, const T* kb, int d, float scale, float* const* out,
                     int64_t valid) {
  constexpr int64_t L = kKeyLaneRows;
  float tail[kRows][L];
  float* dst[kRows];
  for (int j = 0; j < kRows; ++j) dst[j] = valid < L ? tail[j] : out[j];
#if defined(__AVX512F__)
  // Two accumulators per row (even and odd columns): one chain of d FMAs would wait on the
  // FMA latency.
  __m512 even[kRows], odd[kRows];
  for (int j = 0; j < kRows; ++j) even[j] = odd[j] = _mm512_setzero_ps();
  int c = 0;
  for (; c + 2 <= d; c += 2) {
    const __m512 k0 = Load16(kb + c * L), k1 = Load16(kb + (c + 1) * L);
    for (int j = 0; j < kRows; ++j) {
      even[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[j][c]), k0, even[j]);
      odd[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[j][c + 1]), k1, odd[j]);
    }
  }
  if (c < d) {
    const __m512 k0 = Load16(kb + c * L);
    for (int j = 0; j < kRows; ++j) even[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[j][c]), k0, even[j]);
  }
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int j = 0; j < kRows; ++j)
    _mm512_storeu_ps(dst[j], _mm512_mul_ps(_mm512_add_ps(even[j], odd[j]), vscale));
#elif defined(YOCO_AVX2)
  __m256 lo[kRows], hi[kRows];
  for (int j = 0; j < kRows; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int c = 0; c < d; ++c) {
    const __m256 k0 = Load8(kb + c * L), k1 = Load8(kb + c * L + 8);
    for (int j = 0; j < kRows; ++j) {
      const __m256 w = _mm256_set1_ps(q[j][c]);
      lo[j] = _mm256_fmadd_ps(w, k0, lo[j]);
      hi[j] = _mm256_fmadd_ps(w, k1, hi[j]);
    }
  }
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int j = 0; j < kRows; ++j) {
    _mm256_storeu_ps(dst[j], _mm256_mul_ps(lo[j], vscale));
    _mm256_storeu_ps(dst[j] + 8, _mm256_mul_ps(hi[j], vscale));
  }
#else
  for (int j = 0; j < kRows; ++j) {
    float acc[L] = {};
    for (int c = 0; c < d; ++c)
      for (int64_t i = 0; i < L; ++i) acc[i] += q[j][c] * LoadOne(kb + c * L + i);
    for (int64_t i = 0; i < L; ++i) dst[j][i] = acc[i] * scale;
  }
#endif
  if (valid < L) {
    for (int j = 0; j < kRows; ++j)
      for (int64_t i = 0; i < valid; ++i) out[j][i] = tail[j][i];
  }
}

// Query rows per LaneBlockScores call: with AVX-512, 8 rows keep 16 accumulators and the two
// key vectors in registers, enough independent FMA chains to hide their latency (the 2 heads of
// a yoco-tiny group alone give 4, half of what the FMA units can take).
constexpr int kMaxScoreRows = 8;

// LaneBlockScores for any number of rows, up to kMaxScoreRows at a time.
template <typename T>
void LaneBlockScoresRows(const float* const* q, int rows, const T* kb, int d, float scale,
                         float* const* out, int64_t valid) {
  for (int j0 = 0; j0 < rows; j0 += kMaxScoreRows) {
    const float* const* qj = q + j0;
    float* const* oj = out + j0;
    WithRowCount<kMaxScoreRows>(std::min(kMaxScoreRows, rows - j0), [&](auto n) {
      LaneBlockScores<decltype(n)::value>(qj, kb, d, scale, oj, valid);
    });
  }
}

// The scores of one block of keys in lanes (rows i0 .. of a range of len keys) for every query
// head of `count` queries reading it (q[m]: query m's [q_heads, d]; scores[m]: its [q_heads][len]
// scores), one KV head's slice at a time for all the rows that read it.
template <typename T>
void LaneBlockScoresAllHeads(const GqaShape& shape, const float* const* q, int64_t count,
                             const T* block, int64_t i0, int64_t len, float scale,
                             float* const* scores) {
  const int d = shape.head_dim;
  const int group = shape.q_heads / shape.kv_heads;
  const int64_t valid = std::min(kKeyLaneRows, len - i0);
  const int64_t rows = count * group;
  for (int kvh = 0; kvh < shape.kv_heads; ++kvh) {
    const T* kb = block + int64_t{kvh} * d * kKeyLaneRows;
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxScoreRows) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxScoreRows, rows - r0));
      const float* qr[kMaxScoreRows];
      float* out[kMaxScoreRows];
      for (int t = 0; t < n; ++t) {
        const int64_t m = (r0 + t) / group;
        const int h = kvh * group + static_cast<int>((r0 + t) % group);
        qr[t] = q[m] + int64_t{h} * d;
        out[t] = scores[m] + h * len + i0;
      }
      LaneBlockScoresRows(qr, n, kb, d, scale, out, valid);
    }
  }
}

// TaskScores for keys in lanes: each block is read once, in address order; no software
// prefetch (see kPrefetchKeys).
template <typename T>
void TaskScoresInLanes(const GqaShape& shape, const float* q, const RowBlocks<T>& keys,
                       int64_t begin, int64_t end, float scale, float* scores) {
  const int64_t len = end - begin;
  for (int64_t i0 = 0; i0 < len; i0 += kKeyLaneRows) {
    // begin is a whole number of blocks: the block of row begin + i0 starts at its row's offset.
    LaneBlockScoresAllHeads(shape, &q, 1, keys.Row(begin + i0), i0, len, scale, &scores);
  }
}

#ifdef YOCO_AVX2
// acc[j][0..32) += Σ_{i<rows} p[j][i] v_i[0..32) for kRows rows of weights sharing the value rows
// v_i (stride ld), so the kRows×4 accumulators stay in registers. Each accumulator's sum runs
// over i in order whatever the other rows: the same bits in any call.
template <int kRows, typename T>
void WeightedSumTile(const T* v, int64_t ld, int64_t rows, const float* const* p,
                     float* const* acc) {
  __m256 a[kRows][4];
  for (int j = 0; j < kRows; ++j)
    for (int c = 0; c < 4; ++c) a[j][c] = _mm256_loadu_ps(acc[j] + 8 * c);
  for (int64_t i = 0; i < rows; ++i) {
    const T* vi = v + i * ld;
    const __m256 v0 = Load8(vi), v1 = Load8(vi + 8);
    const __m256 v2 = Load8(vi + 16), v3 = Load8(vi + 24);
    for (int j = 0; j < kRows; ++j) {
      const __m256 w = _mm256_broadcast_ss(p[j] + i);
      a[j][0] = _mm256_fmadd_ps(w, v0, a[j][0]);
      a[j][1] = _mm256_fmadd_ps(w, v1, a[j][1]);
      a[j][2] = _mm256_fmadd_ps(w, v2, a[j][2]);
      a[j][3] = _mm256_fmadd_ps(w, v3, a[j][3]);
    }
  }
  for (int j = 0; j < kRows; ++j)
    for (int c = 0; c < 4; ++c) _mm256_storeu_ps(acc[j] + 8 * c, a[j][c]);
}
#endif

#if defined(__AVX512F__)
// As WeightedSumTile, 64 columns in zmm registers, over len value rows: kValueBlock rows from
// each of blocks[0..] (stride ld), the sums starting from acc when `add`, from zero otherwise.
// Each sum runs over i in order, so a range's blocks in one call give the bits of one call per
// block from zeroed sums; in one call the sums stay in registers from the range's first row to
// its last (block by block they went to memory and back every 32 rows, and a shared range's
// sums, 1 KB a member, do not stay in L1: a fifth of its V pass).
template <int kRows, typename T>
void WeightedSumTile512(const T* const* blocks, int64_t ld, int64_t len, const float* const* p,
                        float* const* acc, bool add) {
  __m512 a[kRows][4];
  for (int j = 0; j < kRows; ++j)
    for (int c = 0; c < 4; ++c)
      a[j][c] = add ? _mm512_loadu_ps(acc[j] + 16 * c) : _mm512_setzero_ps();
  for (int64_t i0 = 0; i0 < len; i0 += kValueBlock) {
    const T* v = blocks[i0 / kValueBlock];
    const int64_t rows = std::min(kValueBlock, len - i0);
    for (int64_t i = 0; i < rows; ++i) {
      const T* vi = v + i * ld;
      const __m512 v0 = Load16(vi), v1 = Load16(vi + 16);
      const __m512 v2 = Load16(vi + 32), v3 = Load16(vi + 48);
      for (int j = 0; j < kRows; ++j) {
        const __m512 w = _mm512_set1_ps(p[j][i0 + i]);
        a[j][0] = _mm512_fmadd_ps(w, v0, a[j][0]);
        a[j][1] = _mm512_fmadd_ps(w, v1, a[j][1]);
        a[j][2] = _mm512_fmadd_ps(w, v2, a[j][2]);
        a[j][3] = _mm512_fmadd_ps(w, v3, a[j][3]);
      }
    }
  }
  for (int j = 0; j < kRows; ++j)
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(acc[j] + 16 * c, a[j][c]);
}
#endif

// The vector tile a block of values is summed with: its columns and the most rows of weights
// one call takes (accumulators and four value vectors in the 32 zmm or 16 ymm registers).
// Columns 0: no tile fits the head dim, a scalar loop instead.
struct ValueTile {
  int columns = 0;
  int max_rows = 1;
};
constexpr int kValueRows512 = 6;   // 24 accumulators and 4 value vectors of 32 zmm
constexpr int kValueRowsAvx2 = 3;  // 12 and 4 of 16 ymm
ValueTile ValueTileFor(int d) {
#if defined(__AVX512F__)
  if (d % 64 == 0) return {64, kValueRows512};
#endif
#ifdef YOCO_AVX2
  if (d % 32 == 0) return {32, kValueRowsAvx2};
#endif
  return {};
}

// The tile's sums over `rows` value rows from v (stride ld) for `count` rows of weights.
template <typename T>
void WeightedSumRows(const ValueTile& tile, const T* v, int64_t ld, int64_t rows,
                     const float* const* p, float* const* acc, int count) {
  for (int j0 = 0; j0 < count; j0 += tile.max_rows) {
    const int n = std::min(tile.max_rows, count - j0);
    [[maybe_unused]] const float* const* pj = p + j0;
    [[maybe_unused]] float* const* aj = acc + j0;
#if defined(__AVX512F__)
    if (tile.columns == 64) {
      WithRowCount<kValueRows512>(n, [&](auto k) {
        WeightedSumTile512<decltype(k)::value>(&v, ld, rows, pj, aj, /*add=*/true);
      });
      continue;
    }
#endif
#ifdef YOCO_AVX2
    WithRowCount<kValueRowsAvx2>(
        n, [&](auto k) { WeightedSumTile<decltype(k)::value>(v, ld, rows, pj, aj); });
#endif
  }
}

// Where a tile reads columns [c, c + 64) (or 32) of a block of value rows that starts at
// `block`: its first row and the row stride. In rows, the rows themselves; in strips, the strip
// that holds column c (REQUIRES there: the columns inside one strip, as c % 32 == 0 gives).
template <typename T>
struct ValueSlice {
  const T* v;
  int64_t ld;
};
template <typename T>
ValueSlice<T> SliceOf(const T* block, bool strips, int64_t width, int64_t c) {
  if (!strips) return {block + c, width};
  const int64_t strip = c / kValueStripWidth * kValueStripWidth;
  return {block + strip * kValueStripRows + (c - strip), std::min(kValueStripWidth, width - strip)};
}

// acc[m]_h += Σ_i p[m]_h[i] v_{begin+i}[kv(h)] over the block of kValueBlock rows at b0 of the
// range [begin, begin + len), for every head of `count` queries reading these values (p[m]:
// query m's [q_heads][len] weights; acc[m]: its [q_heads, d] sums, in L1). The values are in
// rows, or in strips; begin and b0 are whole numbers of blocks.
template <typename T>
void WeightedSumBlock(const GqaShape& shape, const RowBlocks<T>& values, bool strips, int64_t begin,
                      int64_t len, int64_t b0, const float* const* p, float* const* acc,
                      int64_t count) {
  const int d = shape.head_dim;
  const int group = shape.q_heads / shape.kv_heads;
  const int64_t ld = int64_t{shape.kv_heads} * d;
  const int64_t b1 = std::min(len, b0 + kValueBlock);
  const ValueTile tile = ValueTileFor(d);
  if (tile.columns > 0) {
    // Both layouts start a block of rows at the same offset.
    const T* block = values.Row(begin + b0);
    const int64_t rows = count * group;
    // Rows per pass, a multiple of every tile's max_rows: the tile takes them max_rows at a
    // time, and a narrow tile at the end of each pass would run far below the others.
    constexpr int kMaxRows = 48;
    for (int kvh = 0; kvh < shape.kv_heads; ++kvh) {
      for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
        const int n = static_cast<int>(std::min<int64_t>(kMaxRows, rows - r0));
        int64_t heads[kMaxRows];
        const float* pr[kMaxRows];
        for (int t = 0; t < n; ++t) {
          heads[t] = kvh * group + (r0 + t) % group;
          pr[t] = p[(r0 + t) / group] + heads[t] * len + b0;
        }
        for (int c0 = 0; c0 < d; c0 += tile.columns) {
          const ValueSlice<T> vs = SliceOf(block, strips, ld, int64_t{kvh} * d + c0);
          float* ar[kMaxRows];
          for (int t = 0; t < n; ++t) ar[t] = acc[(r0 + t) / group] + heads[t] * d + c0;
          WeightedSumRows(tile, vs.v, vs.ld, b1 - b0, pr, ar, n);
        }
      }
    }
    return;
  }
  for (int64_t m = 0; m < count; ++m) {
    for (int64_t i = b0; i < b1; ++i) {
      for (int h = 0; h < shape.q_heads; ++h) {
        const int64_t c0 = int64_t{h / group} * d;
        float* ah = acc[m] + int64_t{h} * d;
        const float w = p[m][h * len + i];
        if (!strips) {
          const T* vh = values.Row(begin + i) + c0;
          if constexpr (std::is_same_v<T, float>) {
            Axpy(w, vh, ah, d);
          } else {
            for (int c = 0; c < d; ++c) ah[c] += w * LoadOne(vh + c);
          }
        } else {
          const T* base = values.Base(begin + i);
          const int64_t row = values.InBlock(begin + i);
          for (int c = 0; c < d; ++c) ah[c] += w * LoadOne(base + ValueStripIndex(row, c0 + c, ld));
        }
      }
    }
  }
}

// acc[m]_h = Σ_i p[m]_h[i] v_{begin+i}[kv(h)] over the whole range [begin, begin + len) in
// strips, for every head of `count` queries reading it: as zeroed sums and WeightedSumBlock
// block after block (the same bits), each tile's sums kept in registers over the whole range
// when the head dim takes 64-column tiles. The range's values are best in L2 already: each
// KV head's rows are read once per tile of rows.
template <typename T>
void WeightedSumRange(const GqaShape& shape, const RowBlocks<T>& values, int64_t begin, int64_t len,
                      const float* const* p, float* const* acc, int64_t count) {
  const int d = shape.head_dim;
  [[maybe_unused]] const int group = shape.q_heads / shape.kv_heads;
  [[maybe_unused]] const int64_t ld = int64_t{shape.kv_heads} * d;
#if defined(__AVX512F__)
  constexpr int64_t kMaxBlocks = kKeysPerRange / kValueBlock;
  if (ValueTileFor(d).columns == 64) {
    const int64_t rows = count * group;
    for (int kvh = 0; kvh < shape.kv_heads; ++kvh) {
      for (int64_t c0 = 0; c0 < d; c0 += 64) {
        const T* blocks[kMaxBlocks];
        int64_t slice_ld = 0;
        for (int64_t b0 = 0; b0 < len; b0 += kValueBlock) {
          const ValueSlice<T> vs =
              SliceOf(values.Row(begin + b0), /*strips=*/true, ld, int64_t{kvh} * d + c0);
          blocks[b0 / kValueBlock] = vs.v;
          slice_ld = vs.ld;
        }
        for (int64_t r0 = 0; r0 < rows; r0 += kValueRows512) {
          const int n = static_cast<int>(std::min<int64_t>(kValueRows512, rows - r0));
          const float* pr[kValueRows512];
          float* ar[kValueRows512];
          for (int t = 0; t < n; ++t) {
            const int64_t m = (r0 + t) / group;
            const int h = kvh * group + static_cast<int>((r0 + t) % group);
            pr[t] = p[m] + h * len;
            ar[t] = acc[m] + int64_t{h} * d + c0;
          }
          WithRowCount<kValueRows512>(n, [&](auto k) {
            WeightedSumTile512<decltype(k)::value>(blocks, slice_ld, len, pr, ar, /*add=*/false);
          });
        }
      }
    }
    return;
  }
#endif
  for (int64_t m = 0; m < count; ++m) {
    for (int64_t i = 0; i < int64_t{shape.q_heads} * d; ++i) acc[m][i] = 0.0f;
  }
  for (int64_t b0 = 0; b0 < len; b0 += kValueBlock) {
    WeightedSumBlock(shape, values, /*strips=*/true, begin, len, b0, p, acc, count);
  }
}

template <typename T>
void TaskWeightedSum(const GqaShape& shape, const RowBlocks<T>& values, bool strips, int64_t begin,
                     int64_t end, const float* p, const NextRows& next, float* acc) {
  const int64_t len = end - begin;
  for (int64_t i = 0; i < int64_t{shape.q_heads} * shape.head_dim; ++i) acc[i] = 0.0f;
  for (int64_t b0 = 0; b0 < len; b0 += kValueBlock) {
    if (!strips) PrefetchAhead(values, begin, len, next, b0 + kPrefetchValues, kValueBlock);
    WeightedSumBlock(shape, values, strips, begin, len, b0, &p, &acc, 1);
  }
}

// Whether two queries' range k reads the same chunks (the same blocks of K and of V, and as many
// rows). Only queries in lanes and strips from block tables take part.
bool SameRange(const DecodeQuery& a, const DecodeQuery& b, int64_t begin) {
  const int64_t end_a = std::min(a.n, begin + kKeysPerRange);
  const int64_t end_b = std::min(b.n, begin + kKeysPerRange);
  if (end_a != end_b || a.block_rows != b.block_rows || a.blocks_bf16 != b.blocks_bf16) {
    return false;
  }
  for (int64_t c = begin / a.block_rows; c <= (end_a - 1) / a.block_rows; ++c) {
    if (a.key_blocks[c] != b.key_blocks[c] || a.value_blocks[c] != b.value_blocks[c]) {
      return false;
    }
  }
  return true;
}

bool MaySharePages(const DecodeQuery& q) {
  return q.key_blocks != nullptr && q.keys_in_lanes && q.values_in_strips &&
         q.block_rows % kKeyLaneRows == 0 && q.block_rows % kValueBlock == 0;
}

// Groups the ranges that read the same chunks: group_of[r] is r's group (-1: none), and group
// g's ranges are group_ranges[group_begin[g], group_begin[g + 1]), the first one's query
// leading. Queries share chunks from their first on (questions on one pre-cached document: a
// shared chunk's prefix is shared too), so the candidates are the queries with the same first
// key chunk, walked range by range while two or more of them still read the same chunks. (It
// sorted every range by its first chunk before: 1.1 ms a layer for 32 queries x 256K keys.)
void FindSharedRanges(const DecodeQuery* queries, int64_t count,
                      const std::vector<int64_t>& first_range, DecodeAttentionScratch* scratch) {
  const int64_t ranges = first_range[count];
  scratch->group_of.assign(ranges, -1);
  scratch->range_query.resize(ranges);
  for (int64_t s = 0; s < count; ++s) {
    for (int64_t r = first_range[s]; r < first_range[s + 1]; ++r) scratch->range_query[r] = s;
  }
  scratch->group_ranges.clear();
  scratch->group_begin.assign(1, 0);
  // The queries that may share, by their first key chunk (kept in the scratch: no allocation per
  // step once it has grown).
  std::vector<std::pair<const void*, int64_t>>& by_first = scratch->query_chunks;
  by_first.clear();
  for (int64_t s = 0; s < count; ++s) {
    if (MaySharePages(queries[s])) by_first.emplace_back(queries[s].key_blocks[0], s);
  }
  if (by_first.size() < 2) return;
  std::sort(by_first.begin(), by_first.end());
  std::vector<int64_t>& active = scratch->active_queries;
  std::vector<int64_t>& rest = scratch->other_queries;
  for (size_t run = 0, run_end = 0; run < by_first.size(); run = run_end) {
    while (run_end < by_first.size() && by_first[run_end].first == by_first[run].first) ++run_end;
    active.clear();
    for (size_t i = run; i < run_end; ++i) active.push_back(by_first[i].second);
    // Range by range: the queries reading the lead's chunks form a group and go on; a query
    // that reads chunks of its own here (its question, or a document of its own from here on)
    // leads the others like it, and one alone drops out.
    for (int64_t begin = 0; active.size() >= 2; begin += kKeysPerRange) {
      rest.clear();
      for (int64_t s : active) {
        if (queries[s].n > begin) rest.push_back(s);
      }
      active.clear();
      while (rest.size() >= 2) {
        const int64_t lead = rest[0];
        const int64_t first_member = static_cast<int64_t>(active.size());
        active.push_back(lead);
        size_t kept = 0;
        for (size_t i = 1; i < rest.size(); ++i) {
          if (SameRange(queries[lead], queries[rest[i]], begin)) {
            active.push_back(rest[i]);
          } else {
            rest[kept++] = rest[i];
          }
        }
        rest.resize(kept);
        if (static_cast<int64_t>(active.size()) - first_member < 2) {
          active.pop_back();
          continue;
        }
        const int64_t g = static_cast<int64_t>(scratch->group_begin.size()) - 1;
        for (size_t m = first_member; m < active.size(); ++m) {
          const int64_t r = first_range[active[m]] + begin / kKeysPerRange;
          scratch->group_of[r] = g;
          scratch->group_ranges.push_back(r);
        }
        scratch->group_begin.push_back(static_cast<int64_t>(scratch->group_ranges.size()));
      }
    }
  }
}

}  // namespace

void DecodeAttention(const GqaShape& shape, const DecodeQuery* queries, int64_t count,
                     DecodeAttentionScratch* scratch) {
  const int d = shape.head_dim;
  const int H = shape.q_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<int64_t>& first_range = scratch->first_range;
  first_range.resize(count + 1);
  first_range[0] = 0;
  for (int64_t s = 0; s < count; ++s) {
    first_range[s + 1] = first_range[s] + (queries[s].n + kKeysPerRange - 1) / kKeysPerRange;
  }
  const int64_t ranges = first_range[count];
  // Tasks: whole sequences when there are enough of them to fill the threads; otherwise runs of
  // ranges, about four tasks a thread so a slow thread can be caught up with, and as long as
  // that allows (each task starts its K and V streams cold).
  const int threads = omp_get_max_threads();
  const int64_t per_task =
      count >= 2 * threads ? int64_t{1} << 40 : std::max<int64_t>(1, ranges / (4 * threads));
  // Ranges of several queries over the same chunks (questions on one document) are one task
  // each, which reads the chunks once for all of them; the rest go in runs as before.
  FindSharedRanges(queries, count, first_range, scratch);
  const std::vector<int64_t>& group_of = scratch->group_of;
  std::vector<DecodeAttentionScratch::Task>& tasks = scratch->tasks;
  tasks.clear();
  for (int64_t s = 0; s < count; ++s) {
    for (int64_t r = first_range[s]; r < first_range[s + 1];) {
      if (group_of[r] >= 0) {
        ++r;
        continue;
      }
      int64_t end = r;
      while (end < first_range[s + 1] && end < r + per_task && group_of[end] < 0) ++end;
      tasks.push_back({s, r, end});
      r = end;
    }
  }
  const int64_t groups = static_cast<int64_t>(scratch->group_begin.size()) - 1;
  int64_t largest_group = 1;
  for (int64_t g = 0; g < groups; ++g) {
    largest_group = std::max(largest_group, scratch->group_begin[g + 1] - scratch->group_begin[g]);
  }
  // A range's block: its sums [H, d], then its [H][max, sum], each rounded up to whole lines.
  const int64_t line_floats = static_cast<int64_t>(kCacheLineBytes / sizeof(float));
  auto whole_lines = [&](int64_t floats) {
    return (floats + line_floats - 1) / line_floats * line_floats;
  };
  const int64_t sums_floats = whole_lines(int64_t{H} * d);
  const int64_t partial_floats = sums_floats + whole_lines(2 * int64_t{H});
  if (static_cast<int64_t>(scratch->partial.size()) < ranges * partial_floats) {
    scratch->partial.resize(ranges * partial_floats);
  }
  const int64_t scores_floats = whole_lines(int64_t{H} * kKeysPerRange);
  const int64_t thread_scores = largest_group * scores_floats;
  if (static_cast<int64_t>(scratch->scores.size()) < threads * thread_scores)
    scratch->scores.resize(threads * thread_scores);

  const int64_t row_floats = int64_t{shape.kv_heads} * d;
  // The rows a pass reads after [row, row + count), as far as they are contiguous.
  auto next_rows = [&](const auto& rows, int64_t row, int64_t count) {
    using T = std::remove_cvref_t<decltype(*rows.Base(0))>;
    return NextRows{reinterpret_cast<const char*>(rows.Row(row)), row_floats * int64_t{sizeof(T)},
                    std::min(count, rows.RowsLeft(row))};
  };

  // Per thread, for a shared range's members: their queries, scores and sums.
  if (static_cast<int64_t>(scratch->member_q.size()) < threads * largest_group) {
    scratch->member_q.resize(threads * largest_group);
    scratch->member_rows.resize(2 * threads * largest_group);
  }

  // A shared range's task: each member's arithmetic is that of its own task (every score and
  // every sum is computed by the same operations in the same order), but each block of keys and
  // of values is taken once for all members' heads that read it, so the FMA units get enough
  // independent rows and the block is read from L1 once per up to eight rows.
  auto run_shared = [&](int64_t g, float* scores) {
    const int64_t* members = scratch->group_ranges.data() + scratch->group_begin[g];
    const int64_t m_count = scratch->group_begin[g + 1] - scratch->group_begin[g];
    const int64_t lead = scratch->range_query[members[0]];
    const DecodeQuery& lq = queries[lead];
    const int64_t begin = (members[0] - first_range[lead]) * kKeysPerRange;
    const int64_t len = std::min(lq.n, begin + kKeysPerRange) - begin;
    const int thread = omp_get_thread_num();
    const float** q = scratch->member_q.data() + thread * largest_group;
    float** member_scores = scratch->member_rows.data() + 2 * thread * largest_group;
    float** member_sums = member_scores + largest_group;
    for (int64_t m = 0; m < m_count; ++m) {
      q[m] = queries[scratch->range_query[members[m]]].q;
      member_scores[m] = scores + m * scores_floats;
      member_sums[m] = scratch->partial.data() + members[m] * partial_floats;
    }
    auto run = [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const RowBlocks<T> keys{lq.key_blocks, lq.block_rows, row_floats};
      const RowBlocks<T> values{lq.value_blocks, lq.block_rows, row_floats};
      // A block's arithmetic for every member takes far longer than reading the block, but the
      // read comes all at once at its first member's first rows, where the hardware prefetcher
      // has not run ahead of a stream this slow: the next block is asked for while this one is
      // computed.
      const int64_t key_block_bytes = kKeyLaneRows * row_floats * int64_t{sizeof(T)};
      for (int64_t i0 = 0; i0 < len; i0 += kKeyLaneRows) {
        if (i0 + kKeyLaneRows < len) {
          PrefetchBytes(reinterpret_cast<const char*>(keys.Row(begin + i0 + kKeyLaneRows)),
                        key_block_bytes);
        }
        LaneBlockScoresAllHeads(shape, q, m_count, keys.Row(begin + i0), i0, len, scale,
                                member_scores);
      }
      for (int64_t m = 0; m < m_count; ++m) {
        float* stats = member_sums[m] + sums_floats;
        for (int h = 0; h < H; ++h) {
          float* sh = member_scores[m] + h * len;
          const float mx = MaxOf(sh, len);
          stats[2 * h] = mx;
          stats[2 * h + 1] = ExpShiftSum(sh, len, mx);
        }
      }
      WeightedSumRange(shape, values, begin, len, member_scores, member_sums, m_count);
    };
    if (lq.blocks_bf16) {
      run(static_cast<uint16_t*>(nullptr));
    } else {
      run(static_cast<float*>(nullptr));
    }
  };

#pragma omp parallel for schedule(dynamic, 1)
  for (size_t t = 0; t < tasks.size() + static_cast<size_t>(groups); ++t) {
    float* scores = scratch->scores.data() + omp_get_thread_num() * thread_scores;
    if (t >= tasks.size()) {
      run_shared(static_cast<int64_t>(t - tasks.size()), scores);
      continue;
    }
    const DecodeAttentionScratch::Task& task = tasks[t];
    const DecodeQuery& dq = queries[task.query];
    // The query's K and V as blocks (an array is one block).
    const bool paged = dq.key_blocks != nullptr;
    const bool keys_bf16 = paged ? dq.blocks_bf16 : dq.keys_bf16 != nullptr;
    const bool values_bf16 = paged ? dq.blocks_bf16 : dq.values_bf16 != nullptr;
    const void* const key_array = keys_bf16 ? static_cast<const void*>(dq.keys_bf16) : dq.keys;
    const void* const value_array =
        values_bf16 ? static_cast<const void*>(dq.values_bf16) : dq.values;
    const void* const* key_blocks = paged ? dq.key_blocks : &key_array;
    const void* const* value_blocks = paged ? dq.value_blocks : &value_array;
    const int64_t block_rows = paged ? dq.block_rows : kOneBlock;
    auto run = [&](auto* key_tag, auto* value_tag) {
      using K = std::remove_pointer_t<decltype(key_tag)>;
      using V = std::remove_pointer_t<decltype(value_tag)>;
      const RowBlocks<K> keys{key_blocks, block_rows, row_floats};
      const RowBlocks<V> values{value_blocks, block_rows, row_floats};
      for (int64_t r = task.first_range; r < task.end_range; ++r) {
        const int64_t begin = (r - first_range[task.query]) * kKeysPerRange;
        const int64_t end = std::min(dq.n, begin + kKeysPerRange);
        const int64_t len = end - begin;
        float* part = scratch->partial.data() + r * partial_floats;
        float* stats = part + sums_floats;  // [H][max, sum]
        const NextRows values_next = next_rows(values, begin, len);
        const NextRows keys_next = r + 1 < task.end_range
                                       ? next_rows(keys, end, std::min(kKeysPerRange, dq.n - end))
                                       : NextRows{};
        if (dq.keys_in_lanes) {
          TaskScoresInLanes(shape, dq.q, keys, begin, end, scale, scores);
        } else {
          TaskScores(shape, dq.q, keys, begin, end, scale, values_next, scores);
        }
        for (int h = 0; h < H; ++h) {
          float* sh = scores + h * len;
          const float m = MaxOf(sh, len);
          stats[2 * h] = m;
          stats[2 * h + 1] = ExpShiftSum(sh, len, m);
        }
        TaskWeightedSum(shape, values, dq.values_in_strips, begin, end, scores, keys_next, part);
      }
    };
    if (keys_bf16 && values_bf16) {
      run(static_cast<uint16_t*>(nullptr), static_cast<uint16_t*>(nullptr));
    } else if (keys_bf16) {
      run(static_cast<uint16_t*>(nullptr), static_cast<float*>(nullptr));
    } else if (values_bf16) {
      run(static_cast<float*>(nullptr), static_cast<uint16_t*>(nullptr));
    } else {
      run(static_cast<float*>(nullptr), static_cast<float*>(nullptr));
    }
  }

  // Merge each sequence's ranges in order: out_h = Σ_r e^(m_r − m) acc_r / Σ_r e^(m_r − m) l_r.
  // Range by range, every head at once: each range's block is read once, in address order (head
  // by head, the reads jumped a block's length each time and ran at a fraction of the
  // bandwidth); every head's sums still run over the ranges in order.
  const int64_t merge_floats = whole_lines(2 * int64_t{H});
  if (static_cast<int64_t>(scratch->merge.size()) < threads * merge_floats) {
    scratch->merge.resize(threads * merge_floats);
  }
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t s = 0; s < count; ++s) {
    float* m = scratch->merge.data() + omp_get_thread_num() * merge_floats;  // [H] maxima
    float* total = m + H;                                                    // [H]
    for (int h = 0; h < H; ++h) m[h] = -INFINITY;
    for (int64_t r = first_range[s]; r < first_range[s + 1]; ++r) {
      const float* stats = scratch->partial.data() + r * partial_floats + sums_floats;
      for (int h = 0; h < H; ++h) m[h] = std::max(m[h], stats[2 * h]);
    }
    float* out = queries[s].out;
    for (int64_t i = 0; i < int64_t{H} * d; ++i) out[i] = 0.0f;
    for (int h = 0; h < H; ++h) total[h] = 0.0f;
    for (int64_t r = first_range[s]; r < first_range[s + 1]; ++r) {
      const float* part = scratch->partial.data() + r * partial_floats;
      const float* stats = part + sums_floats;
      for (int h = 0; h < H; ++h) {
        const float f = std::exp(stats[2 * h] - m[h]);
        total[h] += f * stats[2 * h + 1];
        Axpy(f, part + int64_t{h} * d, out + int64_t{h} * d, d);
      }
    }
    for (int h = 0; h < H; ++h) {
      const float inv = 1.0f / total[h];
      for (int c = 0; c < d; ++c) out[int64_t{h} * d + c] *= inv;
    }
  }
}

}  // namespace yoco::cpu
