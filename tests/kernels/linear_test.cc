// Linear layers against a double-precision product, for fp32 and bf16 weights, row-major and
// packed (8-row groups), and q8, every input-row count the streaming, packed and sgemm paths take,
// matrices whose rows or columns do not fill a group, and the residual add.
#include "kernels/cpu/linear.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "tests/kernels/random_inputs.h"

namespace yoco {
namespace {

using cpu::WeightMatrix;
using cpu::WeightType;

uint16_t ToBf16(float f) {  // truncation is fine: the reference uses the same stored values
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

double FromBf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  int64_t rows, cols;
};

class LinearTest : public ::testing::TestWithParam<Case> {};

TEST_P(LinearTest, MatchesDoubleProductInEveryLayout) {
  const auto [rows, cols] = GetParam();
  const std::vector<float> wf = testing::RandomFloats(rows * cols, 1);
  std::vector<uint16_t> wb(rows * cols), packed(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) wb[i] = ToBf16(wf[i]);
  const bool packable = cpu::CanPackBf16(rows, cols);
  if (packable) cpu::PackBf16Rows(wb.data(), rows, cols, packed.data());

  std::vector<WeightMatrix> layouts = {{wf.data(), WeightType::kF32, rows, cols},
                                       {wb.data(), WeightType::kBF16, rows, cols}};
  if (packable) layouts.push_back({packed.data(), WeightType::kBF16, rows, cols, true});

  for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 33, 256, 257}) {
    const std::vector<float> x = testing::RandomFloats(m * cols, 2 + m);
    const std::vector<float> residual = testing::RandomFloats(m * rows, 100 + m);
    for (size_t l = 0; l < layouts.size(); ++l) {
      const WeightMatrix& w = layouts[l];
      for (bool accumulate : {false, true}) {
        std::vector<float> y = residual, scratch;
        cpu::Linear(x.data(), m, w, y.data(), accumulate, &scratch);
        // In the packed layout decode streams, up to the streaming kernel's rows a row's result
        // is the same bits alone as in the batch (a sequence's tokens must not depend on its
        // decode batch). Row-major tails leave FMA contraction to the compiler.
        for (int64_t r = 0; w.packed && m <= cpu::StreamingRows(w) && r < m; ++r) {
          std::vector<float> single(residual.begin() + r * rows, residual.begin() + (r + 1) * rows);
          cpu::Linear(x.data() + r * cols, 1, w, single.data(), accumulate, &scratch);
          ASSERT_EQ(0, std::memcmp(single.data(), y.data() + r * rows, rows * sizeof(float)))
              << "layout " << l << " m " << m << " row " << r;
        }
        double max_err = 0, max_ref = 0;
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t n = 0; n < rows; ++n) {
            double want = accumulate ? residual[r * rows + n] : 0.0;
            for (int64_t c = 0; c < cols; ++c) {
              const double wv = l == 0 ? wf[n * cols + c] : FromBf16(wb[n * cols + c]);
              want += wv * x[r * cols + c];
            }
            max_err = std::max(max_err, std::fabs(y[r * rows + n] - want));
            max_ref = std::max(max_ref, std::fabs(want));
          }
        }
        EXPECT_LT(max_err, 1e-5 * std::max(max_ref, 1.0) * std::sqrt(double(cols)))
            << "layout " << l << " m " << m << " accumulate " << accumulate;
      }
    }
  }
  if (packable) {  // rows read back from the packed layout (the CUDA backend uploads them so)
    const WeightMatrix w{packed.data(), WeightType::kBF16, rows, cols, true};
    std::vector<float> row(cols);
    for (int64_t n = 0; n < rows; ++n) {
      w.RowToFloat(n, row.data());
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(row[c], FromBf16(wb[n * cols + c]));
    }
  }
}

// The packed layout as WeightMatrix::packed states it, element by element: groups of 32 rows
// stored column pair by column pair (a row's two values side by side), then the rows after the
// last group row-major.
TEST(PackBf16RowsTest, StoresGroupsByColumnPairThenTheRestRowMajor) {
  constexpr int64_t kRows = 70, kCols = 6;
  std::vector<uint16_t> src(kRows * kCols), dst(kRows * kCols);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  cpu::PackBf16Rows(src.data(), kRows, kCols, dst.data());
  size_t at = 0;
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t pair = 0; pair < kCols / 2; ++pair) {
      for (int64_t j = 0; j < 32; ++j) {
        for (int64_t t = 0; t < 2; ++t, ++at) {
          ASSERT_EQ(dst[at], src[(g * 32 + j) * kCols + 2 * pair + t]) << "element " << at;
        }
      }
    }
  }
  for (int64_t r = 64; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c, ++at) ASSERT_EQ(dst[at], src[r * kCols + c]);
  }
}

// q8: every weight within half a step of its block's scale, the products against a double
// product of the dequantized weights, and a row's result the same bits whatever the number of
// input rows computed with it (a sequence's tokens must not depend on its batch).
TEST(Q8LinearTest, QuantizesWithinHalfAStepAndMatchesDoubleProduct) {
  for (const auto [rows, cols] : {Case{8, 32}, Case{13, 64}, Case{37, 96}, Case{64, 64},
                                  Case{300, 160}, Case{5, 32}, Case{1030, 32}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
    ASSERT_TRUE(cpu::CanQuantizeQ8(rows, cols));
    std::vector<float> wf = testing::RandomFloats(rows * cols, 7);
    for (int64_t c = 0; c < cols; ++c) wf[c] = 0.0f;  // an all-zero row: scale 0
    std::vector<uint8_t> q8(cpu::Q8Bytes(rows, cols));
    cpu::QuantizeQ8(wf.data(), rows, cols, q8.data());
    const WeightMatrix w{q8.data(), WeightType::kQ8, rows, cols};
    EXPECT_EQ(w.bytes(), static_cast<int64_t>(q8.size()));
    std::vector<float> deq(rows * cols);
    for (int64_t n = 0; n < rows; ++n) w.RowToFloat(n, deq.data() + n * cols);
    for (int64_t n = 0; n < rows; ++n) {
      for (int64_t b = 0; b < cols; b += cpu::kQ8Block) {
        double max_abs = 0;
        for (int64_t i = 0; i < cpu::kQ8Block; ++i)
          max_abs = std::max(max_abs, std::fabs(double(wf[n * cols + b + i])));
        const double step = max_abs / 127;
        for (int64_t i = 0; i < cpu::kQ8Block; ++i) {
          ASSERT_LE(std::fabs(deq[n * cols + b + i] - wf[n * cols + b + i]), step * 0.5 + 1e-7)
              << "row " << n << " column " << b + i;
        }
      }
    }
    std::vector<float> single(rows);
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 32, 33, 40, 257}) {
      const std::vector<float> x = testing::RandomFloats(m * cols, 2 + m);
      const std::vector<float> residual = testing::RandomFloats(m * rows, 100 + m);
      for (bool accumulate : {false, true}) {
        std::vector<float> y = residual, scratch;
        cpu::Linear(x.data(), m, w, y.data(), accumulate, &scratch);
        double max_err = 0, max_ref = 0;
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t n = 0; n < rows; ++n) {
            double want = accumulate ? residual[r * rows + n] : 0.0;
            for (int64_t c = 0; c < cols; ++c) want += double(deq[n * cols + c]) * x[r * cols + c];
            max_err = std::max(max_err, std::fabs(y[r * rows + n] - want));
            max_ref = std::max(max_ref, std::fabs(want));
          }
        }
        EXPECT_LT(max_err, 1e-5 * std::max(max_ref, 1.0) * std::sqrt(double(cols)))
            << "m " << m << " accumulate " << accumulate;
        if (m > cpu::StreamingRows(w) || accumulate) continue;  // beyond: sgemm, widened rows
        for (int64_t r = 0; r < m; ++r) {  // the streaming kernel, one row at a time
          cpu::Linear(x.data() + r * cols, 1, w, single.data(), false, &scratch);
          ASSERT_EQ(0, std::memcmp(single.data(), y.data() + r * rows, rows * sizeof(float)))
              << "m " << m << " row " << r;
        }
      }
    }
  }
}

// Q8WidenColumns writes each row's dequantized values (Q8RowToFloat's, bit for bit) as a column
// of the block, for ranges that start and end inside 8-row groups as well as whole groups, and
// nothing outside the range's columns.
TEST(Q8WidenColumnsTest, WritesRowToFloatValuesAsColumns) {
  constexpr int64_t kRows = 37, kCols = 96;
  const std::vector<float> wf = testing::RandomFloats(kRows * kCols, 11);
  std::vector<uint8_t> q8(cpu::Q8Bytes(kRows, kCols));
  cpu::QuantizeQ8(wf.data(), kRows, kCols, q8.data());
  std::vector<float> row(kCols);
  for (const auto& [r0, r1] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 37}, {3, 29}, {8, 16}, {5, 6}, {32, 37}}) {
    SCOPED_TRACE(::testing::Message() << "rows " << r0 << ".." << r1);
    const int64_t n = r1 - r0, ld = n + 5;
    constexpr float kUntouched = -12345.0f;
    std::vector<float> out(kCols * ld, kUntouched);
    cpu::Q8WidenColumns(q8.data(), kCols, r0, r1, out.data(), ld);
    for (int64_t r = r0; r < r1; ++r) {
      cpu::Q8RowToFloat(q8.data(), kCols, r, row.data());
      for (int64_t c = 0; c < kCols; ++c) {
        ASSERT_EQ(out[c * ld + (r - r0)], row[c]) << "row " << r << " column " << c;
      }
    }
    for (int64_t c = 0; c < kCols; ++c) {
      for (int64_t i = n; i < ld; ++i) ASSERT_EQ(out[c * ld + i], kUntouched) << "column " << c;
    }
  }
}

// FusedLinear gives each matrix what Linear gives it alone: the same bits where Linear streams
// it, the same values to rounding where rows are widened for sgemm (one call then spans
// matrices, so its blocks cut across them), for mixed layouts and every path's row counts.
TEST(FusedLinearTest, GivesEachMatrixWhatLinearGivesItAlone) {
  constexpr int64_t kCols = 64;
  struct Matrix {
    int64_t rows;
    WeightType type;
    bool packed;
    std::vector<float> f32;
    std::vector<uint16_t> bf16;
    std::vector<uint8_t> q8;
    WeightMatrix w;
  };
  std::vector<Matrix> matrices;
  matrices.reserve(6);
  const std::tuple<int64_t, WeightType, bool> kinds[] = {
      {96, WeightType::kBF16, true}, {1030, WeightType::kBF16, true},
      {6, WeightType::kBF16, false}, {40, WeightType::kQ8, false},
      {50, WeightType::kF32, false}, {45, WeightType::kBF16, true}};
  for (const auto& [rows, type, packed] : kinds) {
    Matrix& mat = matrices.emplace_back();
    mat.rows = rows;
    mat.f32 = testing::RandomFloats(rows * kCols, 30 + static_cast<int>(matrices.size()));
    const void* data = mat.f32.data();
    if (type == WeightType::kBF16) {
      std::vector<uint16_t> plain(rows * kCols);
      for (int64_t i = 0; i < rows * kCols; ++i) plain[i] = ToBf16(mat.f32[i]);
      mat.bf16 = plain;
      if (packed) cpu::PackBf16Rows(plain.data(), rows, kCols, mat.bf16.data());
      data = mat.bf16.data();
    } else if (type == WeightType::kQ8) {
      mat.q8.resize(cpu::Q8Bytes(rows, kCols));
      cpu::QuantizeQ8(mat.f32.data(), rows, kCols, mat.q8.data());
      data = mat.q8.data();
    }
    mat.w = WeightMatrix{data, type, rows, kCols, packed};
  }
  for (int64_t m : {1, 3, 8, 9, 32, 33, 256, 257, 300}) {
    const std::vector<float> x = testing::RandomFloats(m * kCols, 60 + m);
    std::vector<std::vector<float>> fused(matrices.size());
    std::vector<cpu::LinearOutput> outputs;
    for (size_t i = 0; i < matrices.size(); ++i) {
      fused[i].assign(m * matrices[i].rows, -1.0f);
      outputs.push_back({&matrices[i].w, fused[i].data()});
    }
    std::vector<float> scratch;
    cpu::FusedLinear(x.data(), m, outputs, &scratch);
    for (size_t i = 0; i < matrices.size(); ++i) {
      const WeightMatrix& w = matrices[i].w;
      std::vector<float> alone(m * w.rows);
      cpu::Linear(x.data(), m, w, alone.data(), false, &scratch);
      if (m <= cpu::StreamingRows(w)) {
        ASSERT_EQ(0, std::memcmp(alone.data(), fused[i].data(), alone.size() * sizeof(float)))
            << "matrix " << i << " m " << m;
        continue;
      }
      double max_err = 0, max_ref = 0;
      for (size_t j = 0; j < alone.size(); ++j) {
        max_err = std::max(max_err, double(std::fabs(alone[j] - fused[i][j])));
        max_ref = std::max(max_ref, double(std::fabs(alone[j])));
      }
      EXPECT_LE(max_err, 1e-5 * std::max(max_ref, 1.0)) << "matrix " << i << " m " << m;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(Case{8, 8}, Case{13, 16}, Case{37, 40}, Case{64, 24},
                                           Case{300, 96}, Case{5, 16}, Case{20, 12}, Case{1030, 32},
                                           Case{70, 10}, Case{32, 2}),
                         [](const auto& info) {
                           // Appended piece by piece: GCC 12 warns (-Wrestrict) of a false
                           // overlap in "r" + std::string.
                           std::string name = "r";
                           name += std::to_string(info.param.rows);
                           name += "c";
                           name += std::to_string(info.param.cols);
                           return name;
                         });

}  // namespace
}  // namespace yoco
