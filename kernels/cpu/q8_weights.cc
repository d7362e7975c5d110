// The q8 layout's quantization, widening and streaming kernel. The kernel keeps fp32 lanes per
// (input row, weight row): a block's 32 products go into a lane sum (one lane per column mod
// the lane count: 16 with AVX-512, 8 with AVX2 and in the scalar build, which follows the AVX2
// order), which the block's scale then adds to the accumulator; the lanes are summed at the
// end. Within one build a row's result does not depend on how many input rows share the call.
#include "kernels/cpu/q8_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {
namespace {

constexpr int64_t kChunkBytes = 8 * sizeof(float) + 8 * kQ8Block;

inline const uint8_t* Chunk(const uint8_t* data, int64_t cols, int64_t group, int64_t block) {
  return data + (group * (cols / kQ8Block) + block) * kChunkBytes;
}

inline float ChunkScale(const uint8_t* chunk, int j) {
  float s;
  std::memcpy(&s, chunk + j * sizeof(float), sizeof(float));
  return s;
}

inline const int8_t* ChunkRow(const uint8_t* chunk, int j) {
  return reinterpret_cast<const int8_t*>(chunk + 8 * sizeof(float) + j * kQ8Block);
}

#if defined(__AVX512F__)
// 16 lanes (one per column mod 16): a block is two products of 16.
// The lanes' sum as halves of 8. Here and below no extract or plain conversion intrinsics: GCC
// 12's warn of an uninitialised use.
inline float Sum16(__m512 a) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, a);
  return HorizontalSum(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}

inline __m512 LoadQ8x16(const int8_t* p) {
  return _mm512_maskz_cvtepi32_ps(
      0xFFFF,
      _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

template <int M>
inline void RowTile(const float* x, int64_t ldx, const uint8_t* data, int64_t cols, int64_t group,
                    int j, float* sums) {
  __m512 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  const int64_t blocks = cols / kQ8Block;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* chunk = Chunk(data, cols, group, b);
    const int8_t* q = ChunkRow(chunk, j);
    const __m512 w0 = LoadQ8x16(q), w1 = LoadQ8x16(q + 16);
    const __m512 s = _mm512_set1_ps(ChunkScale(chunk, j));
    const int64_t c = b * kQ8Block;
    for (int r = 0; r < M; ++r) {
      const float* xr = x + r * ldx + c;
      __m512 t = _mm512_mul_ps(w0, _mm512_loadu_ps(xr));
      t = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xr + 16), t);
      acc[r] = _mm512_fmadd_ps(t, s, acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) sums[r] = Sum16(acc[r]);
}

// Asks for the chunk 8 chunks ahead of `chunk` in L1 (its 288 bytes: five lines). Chunks are
// stored back to back, a group's after the previous group's, so this runs into the next group.
inline void PrefetchAhead(const uint8_t* chunk) {
  const char* p = reinterpret_cast<const char*>(chunk) + 8 * kChunkBytes;
  for (int line = 0; line < 5; ++line) _mm_prefetch(p + 64 * line, _MM_HINT_T0);
}

inline void GroupRow1(const float* x, const uint8_t* data, int64_t cols, int64_t group,
                      float* sums) {
  __m512 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm512_setzero_ps();
  const int64_t blocks = cols / kQ8Block;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* chunk = Chunk(data, cols, group, b);
    PrefetchAhead(chunk);
    const float* xr = x + b * kQ8Block;
    const __m512 x0 = _mm512_loadu_ps(xr), x1 = _mm512_loadu_ps(xr + 16);
    for (int j = 0; j < 8; ++j) {
      const int8_t* q = ChunkRow(chunk, j);
      __m512 t = _mm512_mul_ps(LoadQ8x16(q), x0);
      t = _mm512_fmadd_ps(LoadQ8x16(q + 16), x1, t);
      acc[j] = _mm512_fmadd_ps(t, _mm512_set1_ps(ChunkScale(chunk, j)), acc[j]);
    }
  }
  for (int j = 0; j < 8; ++j) sums[j] = Sum16(acc[j]);
}

// Two input rows against all 8 rows of a group in one pass over it: each weight block is
// widened once for both rows and the rows' x stay in registers (RowTile walks the group once
// per weight row and reloads x each time). Per (input row, weight row) the same operations in
// the same order as RowTile and GroupRow1, so the same bits. With `prefetch` it asks for what
// follows, as GroupRow1 does: the first of several passes over a group (2 threads, 100 MB of q8
// weights: 3 rows 4.9 -> 3.7 ms, 4 rows 6.7 -> 5.0, 8 rows 8.9 -> 7.5); a lone pass (2 rows)
// keeps pace with the bus without it and measured up to 12% slower with it.
inline void GroupTile2(const float* x, int64_t ldx, const uint8_t* data, int64_t cols,
                       int64_t group, bool prefetch, float sums[8][2]) {
  __m512 acc[8][2];
  for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
  const int64_t blocks = cols / kQ8Block;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* chunk = Chunk(data, cols, group, b);
    if (prefetch) PrefetchAhead(chunk);
    const float* xr = x + b * kQ8Block;
    const __m512 x00 = _mm512_loadu_ps(xr), x01 = _mm512_loadu_ps(xr + 16);
    const __m512 x10 = _mm512_loadu_ps(xr + ldx), x11 = _mm512_loadu_ps(xr + ldx + 16);
    for (int j = 0; j < 8; ++j) {
      const int8_t* q = ChunkRow(chunk, j);
      const __m512 w0 = LoadQ8x16(q), w1 = LoadQ8x16(q + 16);
      const __m512 s = _mm512_set1_ps(ChunkScale(chunk, j));
      acc[j][0] = _mm512_fmadd_ps(_mm512_fmadd_ps(w1, x01, _mm512_mul_ps(w0, x00)), s, acc[j][0]);
      acc[j][1] = _mm512_fmadd_ps(_mm512_fmadd_ps(w1, x11, _mm512_mul_ps(w0, x10)), s, acc[j][1]);
    }
  }
  for (int j = 0; j < 8; ++j) {
    sums[j][0] = Sum16(acc[j][0]);
    sums[j][1] = Sum16(acc[j][1]);
  }
}
#elif defined(YOCO_AVX2)
inline __m256 LoadQ8x8(const int8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Input rows [0, M) of x against weight row j of the group starting at chunk block 0.
template <int M>
inline void RowTile(const float* x, int64_t ldx, const uint8_t* data, int64_t cols, int64_t group,
                    int j, float* sums) {
  __m256 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t blocks = cols / kQ8Block;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* chunk = Chunk(data, cols, group, b);
    const int8_t* q = ChunkRow(chunk, j);
    const __m256 w0 = LoadQ8x8(q), w1 = LoadQ8x8(q + 8), w2 = LoadQ8x8(q + 16),
                 w3 = LoadQ8x8(q + 24);
    const __m256 s = _mm256_set1_ps(ChunkScale(chunk, j));
    const int64_t c = b * kQ8Block;
    for (int r = 0; r < M; ++r) {
      const float* xr = x + r * ldx + c;
      __m256 t = _mm256_mul_ps(w0, _mm256_loadu_ps(xr));
      t = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), t);
      t = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xr + 16), t);
      t = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xr + 24), t);
      acc[r] = _mm256_fmadd_ps(t, s, acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) sums[r] = HorizontalSum(acc[r]);
}

// One input row against all 8 rows of a group: 8 independent chains over one stream.
inline void GroupRow1(const float* x, const uint8_t* data, int64_t cols, int64_t group,
                      float* sums) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  const int64_t blocks = cols / kQ8Block;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* chunk = Chunk(data, cols, group, b);
    const float* xr = x + b * kQ8Block;
    const __m256 x0 = _mm256_loadu_ps(xr), x1 = _mm256_loadu_ps(xr + 8),
                 x2 = _mm256_loadu_ps(xr + 16), x3 = _mm256_loadu_ps(xr + 24);
    for (int j = 0; j < 8; ++j) {
      const int8_t* q = ChunkRow(chunk, j);
      __m256 t = _mm256_mul_ps(LoadQ8x8(q), x0);
      t = _mm256_fmadd_ps(LoadQ8x8(q + 8), x1, t);
      t = _mm256_fmadd_ps(LoadQ8x8(q + 16), x2, t);
      t = _mm256_fmadd_ps(LoadQ8x8(q + 24), x3, t);
      acc[j] = _mm256_fmadd_ps(t, _mm256_set1_ps(ChunkScale(chunk, j)), acc[j]);
    }
  }
  for (int j = 0; j < 8; ++j) sums[j] = HorizontalSum(acc[j]);
}
#else
// The same lanes and order as the AVX2 kernel, one value at a time.
float RowDot(const float* x, const uint8_t* data, int64_t cols, int64_t group, int j) {
  float acc[8] = {};
  for (int64_t b = 0; b < cols / kQ8Block; ++b) {
    const uint8_t* chunk = Chunk(data, cols, group, b);
    const int8_t* q = ChunkRow(chunk, j);
    const float s = ChunkScale(chunk, j);
    const float* xr = x + b * kQ8Block;
    for (int l = 0; l < 8; ++l) {
      float t = q[l] * xr[l];
      for (int v = 1; v < 4; ++v) t = std::fma(float(q[v * 8 + l]), xr[v * 8 + l], t);
      acc[l] = std::fma(t, s, acc[l]);
    }
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}
#endif

inline void Store(float* y, float v, bool accumulate) { *y = accumulate ? *y + v : v; }

#ifdef YOCO_AVX2
// A whole group's block b as columns: 8 rows × 8 columns at a time, widened and scaled as rows
// (one load and conversion per row), then transposed so each column is one store of 8 floats.
void WidenChunkColumns(const uint8_t* chunk, float* out, int64_t ld) {
  __m256 scale[8];
  for (int j = 0; j < 8; ++j) scale[j] = _mm256_set1_ps(ChunkScale(chunk, j));
  for (int c = 0; c < kQ8Block; c += 8) {
    __m256 v[8];
    for (int j = 0; j < 8; ++j) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(ChunkRow(chunk, j) + c));
      v[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), scale[j]);
    }
    // The usual 8×8 transpose: pairs of rows interleaved, then quads, then the 128-bit halves.
    __m256 t[8], u[8];
    for (int j = 0; j < 8; j += 2) {
      t[j] = _mm256_unpacklo_ps(v[j], v[j + 1]);
      t[j + 1] = _mm256_unpackhi_ps(v[j], v[j + 1]);
    }
    for (int j = 0; j < 8; j += 4) {
      u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
      u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
      u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
      u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
      _mm256_storeu_ps(out + (c + i) * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
      _mm256_storeu_ps(out + (c + i + 4) * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
  }
}
#endif

}  // namespace

void QuantizeQ8(const float* src, int64_t rows, int64_t cols, uint8_t* dst) {
  const int64_t groups = (rows + 7) / 8;
  const int64_t blocks = cols / kQ8Block;
  std::memset(dst, 0, Q8Bytes(rows, cols));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* chunk = dst + (g * blocks + b) * kChunkBytes;
      for (int j = 0; j < 8 && g * 8 + j < rows; ++j) {
        const float* w = src + (g * 8 + j) * cols + b * kQ8Block;
        float max_abs = 0.0f;
        for (int64_t i = 0; i < kQ8Block; ++i) max_abs = std::max(max_abs, std::fabs(w[i]));
        const float scale = max_abs / 127.0f;
        std::memcpy(chunk + j * sizeof(float), &scale, sizeof(float));
        int8_t* q = reinterpret_cast<int8_t*>(chunk + 8 * sizeof(float) + j * kQ8Block);
        for (int64_t i = 0; i < kQ8Block; ++i) {
          q[i] = scale == 0.0f ? 0
                               : static_cast<int8_t>(
                                     std::clamp(std::lround(w[i] / scale), long{-127}, long{127}));
        }
      }
    }
  }
}

void Q8RowToFloat(const uint8_t* data, int64_t cols, int64_t r, float* out) {
  const int64_t blocks = cols / kQ8Block;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* chunk = Chunk(data, cols, r / 8, b);
    const int8_t* q = ChunkRow(chunk, static_cast<int>(r % 8));
    const float s = ChunkScale(chunk, static_cast<int>(r % 8));
    for (int64_t i = 0; i < kQ8Block; ++i) out[b * kQ8Block + i] = q[i] * s;
  }
}

void Q8WidenColumns(const uint8_t* data, int64_t cols, int64_t r0, int64_t r1, float* out,
                    int64_t ld) {
  const int64_t blocks = cols / kQ8Block;
  for (int64_t r = r0; r < r1;) {
    const int64_t group = r / 8;
    const int j0 = static_cast<int>(r % 8);
    const int j1 = static_cast<int>(std::min<int64_t>(8, r1 - group * 8));
    float* o = out + (r - r0);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* chunk = Chunk(data, cols, group, b);
      float* ob = o + b * kQ8Block * ld;
#ifdef YOCO_AVX2
      if (j0 == 0 && j1 == 8) {
        WidenChunkColumns(chunk, ob, ld);
        continue;
      }
#endif
      for (int j = j0; j < j1; ++j) {
        const int8_t* q = ChunkRow(chunk, j);
        const float s = ChunkScale(chunk, j);
        for (int64_t i = 0; i < kQ8Block; ++i) ob[i * ld + (j - j0)] = q[i] * s;
      }
    }
    r += j1 - j0;
  }
}

void Q8StreamGroups(const float* x, int64_t m, const uint8_t* data, int64_t rows, int64_t cols,
                    float* y, bool accumulate, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    const int live = static_cast<int>(std::min<int64_t>(8, rows - g * 8));
#ifdef YOCO_AVX2
    if (m == 1) {
      float sums[8];
      GroupRow1(x, data, cols, g, sums);
      for (int j = 0; j < live; ++j) Store(y + g * 8 + j, sums[j], accumulate);
      continue;
    }
#if defined(__AVX512F__)
    {
      int64_t r = 0;
      for (; r + 2 <= m; r += 2) {
        float sums[8][2];
        GroupTile2(x + r * cols, cols, data, cols, g, /*prefetch=*/r == 0 && m > 2, sums);
        for (int j = 0; j < live; ++j) {
          Store(y + r * rows + g * 8 + j, sums[j][0], accumulate);
          Store(y + (r + 1) * rows + g * 8 + j, sums[j][1], accumulate);
        }
      }
      if (r < m) {
        float sums[8];
        GroupRow1(x + r * cols, data, cols, g, sums);
        for (int j = 0; j < live; ++j) Store(y + r * rows + g * 8 + j, sums[j], accumulate);
      }
      continue;
    }
#endif
    for (int j = 0; j < live; ++j) {
      const int64_t n = g * 8 + j;
      int64_t r = 0;
      float sums[4];
      for (; r + 4 <= m; r += 4) {
        RowTile<4>(x + r * cols, cols, data, cols, g, j, sums);
        for (int i = 0; i < 4; ++i) Store(y + (r + i) * rows + n, sums[i], accumulate);
      }
      for (; r + 2 <= m; r += 2) {
        RowTile<2>(x + r * cols, cols, data, cols, g, j, sums);
        for (int i = 0; i < 2; ++i) Store(y + (r + i) * rows + n, sums[i], accumulate);
      }
      for (; r < m; ++r) {
        RowTile<1>(x + r * cols, cols, data, cols, g, j, sums);
        Store(y + r * rows + n, sums[0], accumulate);
      }
    }
#else
    for (int j = 0; j < live; ++j) {
      for (int64_t r = 0; r < m; ++r) {
        Store(y + r * rows + g * 8 + j, RowDot(x + r * cols, data, cols, g, j), accumulate);
      }
    }
#endif
  }
}

}  // namespace yoco::cpu
