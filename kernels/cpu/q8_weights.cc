// The q8 layout's quantization, widening and streaming kernel. The kernel widens a column of 16
// (AVX-512) or 8 (AVX2) rows with one sign-extending load and a conversion, and multiplies it by
// one input value broadcast from memory: a vector's lanes are whole results, so there are no sums
// across lanes, and every tile, row count and instruction set runs each output's arithmetic in
// the same order (q8_weights.h), for the same bits.
#include "kernels/cpu/q8_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/vector_math.h"

namespace yoco::cpu {
namespace {

inline const uint8_t* Chunk(const uint8_t* data, int64_t cols, int64_t group, int64_t block) {
  return data + (group * (cols / kQ8Block) + block) * kQ8ChunkBytes;
}

inline float ChunkScale(const uint8_t* chunk, int64_t j) {
  float s;
  std::memcpy(&s, chunk + j * sizeof(float), sizeof(float));
  return s;
}

// Column c of a chunk: the group's 32 rows' values.
inline const int8_t* ChunkColumn(const uint8_t* chunk, int64_t c) {
  return reinterpret_cast<const int8_t*>(chunk + kQ8GroupRows * sizeof(float) + c * kQ8GroupRows);
}

inline float WidenOne(const uint8_t* chunk, int64_t j, int64_t c) {
  return float(ChunkColumn(chunk, c)[j]) * ChunkScale(chunk, j);
}

// The tile that reads a group from memory asks for the bytes this far ahead of those it reads (a
// line per two columns, two at a block's scales), running on into the next group: the hardware
// prefetcher alone does not overlap the reads with the arithmetic. The two-group tiles (few input
// rows) read two streams at once and look less far ahead in each (40 products 2048×768, 2
// threads, one row: 1.37 ms at 1 KB ahead, 1.23 at 2 KB, 1.14 at 4 KB, 1.22 at 8 KB).
constexpr int64_t kGroupPrefetchBytes = 8192;
constexpr int64_t kPairPrefetchBytes = 4096;

[[gnu::always_inline]] inline void PrefetchLine(const void* p) {
#ifdef YOCO_AVX2
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
#else
  (void)p;  // without AVX2, prefetching is left to the hardware
#endif
}

#if defined(__AVX512F__)
// 16 rows' values of one column (16 bytes) as floats: the masked forms because GCC 12 warns of
// an uninitialised use in the plain ones.
inline __m512 WidenQ8x16(const int8_t* q) {
  const __m512i v =
      _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  return _mm512_maskz_cvtepi32_ps(0xFFFF, v);
}

// Stores (or adds) the lanes of `v` that hold live rows (`live` counted from the vector's first).
inline void StoreLive(float* y, __m512 v, int live, bool accumulate) {
  if (live <= 0) return;
  const __mmask16 mask = live >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << live) - 1);
  if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), v);
  _mm512_mask_storeu_ps(y, mask, v);
}

// M input rows (k apart) against the 32 rows of G adjacent groups (`group` the first's first
// chunk, `group_bytes` apart), of which `live` rows are outputs; y has rows ldy apart. Per block
// t = Σ q·x over its columns, then acc += t · scale: one multiply-add per block where scaling
// each widened column costs one per column. The column loop is unrolled: as a loop, GCC 12 kept
// the sums in memory (143 GFLOP/s at 8 rows against ~300).
template <int M, int G>
inline void Q8GroupTile(const float* x, int64_t k, const uint8_t* group, int64_t group_bytes,
                        float* y, int64_t ldy, bool accumulate, int64_t ahead, int live) {
  __m512 acc[M][2 * G];
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < 2 * G; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < k / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    __m512 t[M][2 * G];
    for (int r = 0; r < M; ++r)
      for (int j = 0; j < 2 * G; ++j) t[r][j] = _mm512_setzero_ps();
#pragma GCC unroll 32
    for (int c = 0; c < kQ8Block; ++c) {
      __m512 w[2 * G];
      for (int s = 0; s < G; ++s) {
        const uint8_t* chunk = group + s * group_bytes + b * kQ8ChunkBytes;
        const int8_t* column = ChunkColumn(chunk, c);
        if (ahead > 0 && c % 2 == 0) PrefetchLine(column + ahead);
        if (ahead > 0 && c == kQ8Block - 1) {  // the next chunk's scales
          PrefetchLine(chunk + kQ8ChunkBytes + ahead);
          PrefetchLine(chunk + kQ8ChunkBytes + ahead + 64);
        }
        for (int h = 0; h < 2; ++h) w[2 * s + h] = WidenQ8x16(column + 16 * h);
      }
      for (int r = 0; r < M; ++r) {
        const __m512 xv = _mm512_set1_ps(xb[r * k + c]);
        for (int j = 0; j < 2 * G; ++j) t[r][j] = _mm512_fmadd_ps(w[j], xv, t[r][j]);
      }
    }
    for (int s = 0; s < G; ++s) {
      const float* scales =
          reinterpret_cast<const float*>(group + s * group_bytes + b * kQ8ChunkBytes);
      for (int h = 0; h < 2; ++h) {
        const __m512 scale = _mm512_loadu_ps(scales + 16 * h);
        const int j = 2 * s + h;
        for (int r = 0; r < M; ++r) acc[r][j] = _mm512_fmadd_ps(t[r][j], scale, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int j = 0; j < 2 * G; ++j) {
      StoreLive(y + r * ldy + 16 * j, acc[r][j], live - 16 * j, accumulate);
    }
  }
}

// Q8GroupTile<rows, G> for 0 < rows <= Max.
template <int Max, int G>
inline void Q8GroupTileOf(int64_t rows, const float* x, int64_t k, const uint8_t* group,
                          int64_t group_bytes, float* y, int64_t ldy, bool accumulate,
                          int64_t ahead, int live) {
  if constexpr (Max > 0) {
    if (rows == Max) {
      Q8GroupTile<Max, G>(x, k, group, group_bytes, y, ldy, accumulate, ahead, live);
    } else {
      Q8GroupTileOf<Max - 1, G>(rows, x, k, group, group_bytes, y, ldy, accumulate, ahead, live);
    }
  }
}
#elif defined(YOCO_AVX2)
// 8 rows' values of one column (8 bytes) as floats.
inline __m256 WidenQ8x8(const int8_t* q) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

inline void StoreLive(float* y, __m256 v, int live, bool accumulate) {
  if (live <= 0) return;
  if (live >= 8) {
    _mm256_storeu_ps(y, accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), v) : v);
    return;
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  for (int j = 0; j < live; ++j) y[j] = accumulate ? y[j] + lanes[j] : lanes[j];
}

// M input rows against the B 8-row blocks of a group from block b0 (a ymm holds a block's
// column); y points at the group's first output; `ahead` and `live` as for the AVX-512 tile, and
// the same operations in the same order.
template <int M, int B>
inline void Q8BlockTile(const float* x, int64_t k, const uint8_t* group, int b0, float* y,
                        int64_t ldy, bool accumulate, int64_t ahead, int live) {
  __m256 acc[M][B];
  for (int r = 0; r < M; ++r)
    for (int i = 0; i < B; ++i) acc[r][i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kQ8Block; ++b) {
    const uint8_t* chunk = group + b * kQ8ChunkBytes;
    const float* xb = x + b * kQ8Block;
    __m256 t[M][B];
    for (int r = 0; r < M; ++r)
      for (int i = 0; i < B; ++i) t[r][i] = _mm256_setzero_ps();
#pragma GCC unroll 32
    for (int c = 0; c < kQ8Block; ++c) {
      const int8_t* column = ChunkColumn(chunk, c);
      if (ahead > 0 && c % 2 == 0) PrefetchLine(column + ahead);
      if (ahead > 0 && c == kQ8Block - 1) {
        PrefetchLine(chunk + kQ8ChunkBytes + ahead);
        PrefetchLine(chunk + kQ8ChunkBytes + ahead + 64);
      }
      __m256 w[B];
      for (int i = 0; i < B; ++i) w[i] = WidenQ8x8(column + 8 * (b0 + i));
      for (int r = 0; r < M; ++r) {
        const __m256 xv = _mm256_broadcast_ss(xb + r * k + c);
        for (int i = 0; i < B; ++i) t[r][i] = _mm256_fmadd_ps(w[i], xv, t[r][i]);
      }
    }
    for (int i = 0; i < B; ++i) {
      const __m256 scale = _mm256_loadu_ps(reinterpret_cast<const float*>(chunk) + 8 * (b0 + i));
      for (int r = 0; r < M; ++r) acc[r][i] = _mm256_fmadd_ps(t[r][i], scale, acc[r][i]);
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int i = 0; i < B; ++i) {
      StoreLive(y + r * ldy + 8 * (b0 + i), acc[r][i], live - 8 * (b0 + i), accumulate);
    }
  }
}
#endif

}  // namespace

void QuantizeQ8(const float* src, int64_t rows, int64_t cols, uint8_t* dst) {
  const int64_t blocks = cols / kQ8Block;
  std::memset(dst, 0, Q8Bytes(rows, cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t j = r % kQ8GroupRows;
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* chunk = dst + ((r / kQ8GroupRows) * blocks + b) * kQ8ChunkBytes;
      const float* w = src + r * cols + b * kQ8Block;
      float max_abs = 0.0f;
      for (int64_t i = 0; i < kQ8Block; ++i) max_abs = std::max(max_abs, std::fabs(w[i]));
      const float scale = max_abs / 127.0f;
      std::memcpy(chunk + j * sizeof(float), &scale, sizeof(float));
      for (int64_t i = 0; i < kQ8Block; ++i) {
        const long q =
            scale == 0.0f ? 0 : std::clamp(std::lround(w[i] / scale), long{-127}, long{127});
        chunk[kQ8GroupRows * sizeof(float) + i * kQ8GroupRows + j] =
            static_cast<uint8_t>(static_cast<int8_t>(q));
      }
    }
  }
}

void Q8RowToFloat(const uint8_t* data, int64_t cols, int64_t r, float* out) {
  for (int64_t b = 0; b < cols / kQ8Block; ++b) {
    const uint8_t* chunk = Chunk(data, cols, r / kQ8GroupRows, b);
    for (int64_t i = 0; i < kQ8Block; ++i) {
      out[b * kQ8Block + i] = WidenOne(chunk, r % kQ8GroupRows, i);
    }
  }
}

void Q8WidenColumns(const uint8_t* data, int64_t cols, int64_t r0, int64_t r1, float* out,
                    int64_t ld) {
  const int64_t blocks = cols / kQ8Block;
  for (int64_t r = r0; r < r1;) {
    const int64_t group = r / kQ8GroupRows;
    const int64_t j0 = r % kQ8GroupRows;
    const int64_t j1 = std::min(kQ8GroupRows, r1 - group * kQ8GroupRows);
    float* o = out + (r - r0);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* chunk = Chunk(data, cols, group, b);
      float* ob = o + b * kQ8Block * ld;
#if defined(__AVX512F__)
      if (j0 == 0 && j1 == kQ8GroupRows) {  // a whole group: two vectors a column
        const __m512 s0 = _mm512_loadu_ps(reinterpret_cast<const float*>(chunk));
        const __m512 s1 = _mm512_loadu_ps(reinterpret_cast<const float*>(chunk) + 16);
        for (int64_t c = 0; c < kQ8Block; ++c) {
          _mm512_storeu_ps(ob + c * ld, _mm512_mul_ps(WidenQ8x16(ChunkColumn(chunk, c)), s0));
          _mm512_storeu_ps(ob + c * ld + 16,
                           _mm512_mul_ps(WidenQ8x16(ChunkColumn(chunk, c) + 16), s1));
        }
        continue;
      }
#elif defined(YOCO_AVX2)
      if (j0 == 0 && j1 == kQ8GroupRows) {  // a whole group: four vectors a column
        __m256 s[4];
        for (int i = 0; i < 4; ++i)
          s[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(chunk) + 8 * i);
        for (int64_t c = 0; c < kQ8Block; ++c) {
          for (int i = 0; i < 4; ++i) {
            _mm256_storeu_ps(ob + c * ld + 8 * i,
                             _mm256_mul_ps(WidenQ8x8(ChunkColumn(chunk, c) + 8 * i), s[i]));
          }
        }
        continue;
      }
#endif
      for (int64_t c = 0; c < kQ8Block; ++c) {
        for (int64_t j = j0; j < j1; ++j) ob[c * ld + (j - j0)] = WidenOne(chunk, j, c);
      }
    }
    r += j1 - j0;
  }
}

void Q8StreamGroups(const float* x, int64_t m, const uint8_t* data, int64_t rows, int64_t cols,
                    float* y, bool accumulate, int64_t g0, int64_t g1) {
  const int64_t k = cols;
  const int64_t group_bytes = (cols / kQ8Block) * kQ8ChunkBytes;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* group = data + g * group_bytes;
    float* yg = y + g * kQ8GroupRows;
    const int live = static_cast<int>(std::min(kQ8GroupRows, rows - g * kQ8GroupRows));
    // The first tile reads the group from memory and asks for what follows; the others find it
    // in L2.
    int64_t ahead = kGroupPrefetchBytes;
#if defined(__AVX512F__)
    // One or two rows, two whole groups at a time where the task has them: a group's few FMA
    // chains alone do not keep up with memory.
    if (m <= 2 && g + 1 < g1 && (g + 2) * kQ8GroupRows <= rows) {
      Q8GroupTileOf<2, 2>(m, x, k, group, group_bytes, yg, rows, accumulate, kPairPrefetchBytes,
                          2 * kQ8GroupRows);
      ++g;
      continue;
    }
    // Six rows a tile (12 sums and 12 accumulators), the rest in one tile.
    int64_t r = 0;
    for (; r + 6 <= m; r += 6, ahead = 0) {
      Q8GroupTile<6, 1>(x + r * k, k, group, group_bytes, yg + r * rows, rows, accumulate, ahead,
                        live);
    }
    Q8GroupTileOf<5, 1>(m - r, x + r * k, k, group, group_bytes, yg + r * rows, rows, accumulate,
                        ahead, live);
#elif defined(YOCO_AVX2)
    // As the packed bf16 tiles: four rows a tile over two blocks, the rest over the whole group.
    for (int b0 = 0; b0 < 4 && m >= 4; b0 += 2) {
      for (int64_t r = 0; r + 4 <= m; r += 4, ahead = 0) {
        Q8BlockTile<4, 2>(x + r * k, k, group, b0, yg + r * rows, rows, accumulate, ahead, live);
      }
    }
    int64_t r = m / 4 * 4;
    for (; r + 2 <= m; r += 2, ahead = 0) {
      Q8BlockTile<2, 4>(x + r * k, k, group, 0, yg + r * rows, rows, accumulate, ahead, live);
    }
    for (; r < m; ++r, ahead = 0) {
      Q8BlockTile<1, 4>(x + r * k, k, group, 0, yg + r * rows, rows, accumulate, ahead, live);
    }
#else
    (void)ahead;
    for (int64_t r = 0; r < m; ++r) {
      for (int j = 0; j < live; ++j) {
        float acc = 0.0f;
        for (int64_t b = 0; b < cols / kQ8Block; ++b) {
          const uint8_t* chunk = group + b * kQ8ChunkBytes;
          float t = 0.0f;
          for (int64_t c = 0; c < kQ8Block; ++c) {
            t = std::fma(float(ChunkColumn(chunk, c)[j]), x[r * k + b * kQ8Block + c], t);
          }
          acc = std::fma(t, ChunkScale(chunk, j), acc);
        }
        float& out = yg[r * rows + j];
        out = accumulate ? out + acc : acc;
      }
    }
#endif
  }
}

}  // namespace yoco::cpu
