// KvRows in both layouts: keys in lanes are stored where cpu::KeyLaneIndex says, with zero
// padding, and every reader that is not an attention kernel (row bytes, fp32 copies, appends
// from either layout, equality) sees the same rows as the row-major layout.
#include "lib/engine/kv_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "lib/engine/dtype.h"
#include "tests/kernels/random_inputs.h"

namespace yoco {
namespace {

using testing::RandomFloats;

constexpr int64_t kWidth = 24;

class KvRowsTest : public ::testing::TestWithParam<KvDtype> {
 protected:
  // The value stored for x: itself, or its bf16 rounding.
  float Stored(float x) const {
    return GetParam() == KvDtype::kF32 ? x : Bf16ToFloat(FloatToBf16(x));
  }
};

// Rows appended in uneven pieces (within, across and at block boundaries).
KvRows Filled(KvDtype dtype, KvLayout layout, const std::vector<float>& rows) {
  KvRows out(dtype, kWidth, layout);
  const int64_t n = static_cast<int64_t>(rows.size()) / kWidth;
  const int64_t pieces[] = {5, 11, 16, 30, 1, 100};
  for (int64_t at = 0, i = 0; at < n; ++i) {
    const int64_t piece = std::min(pieces[i % 6], n - at);
    out.Append(rows.data() + at * kWidth, piece);
    at += piece;
  }
  return out;
}

TEST_P(KvRowsTest, KeysInLanesAreStoredAtTheirLaneIndexWithZeroPadding) {
  const int64_t n = 53;  // three whole blocks of 16 and five rows
  const auto rows = RandomFloats(n * kWidth, 1);
  const KvRows lanes = Filled(GetParam(), KvLayout::kKeyLanes, rows);
  ASSERT_EQ(lanes.rows(), n);
  const int64_t stored = 4 * 16 * kWidth;
  for (int64_t i = 0; i < stored; ++i) {
    const int64_t block = i / (16 * kWidth), c = i % (16 * kWidth) / 16, lane = i % 16;
    const int64_t r = block * 16 + lane;
    const float got = GetParam() == KvDtype::kF32 ? lanes.f32()[i] : Bf16ToFloat(lanes.bf16()[i]);
    const float want = r < n ? Stored(rows[r * kWidth + c]) : 0.0f;
    ASSERT_EQ(got, want) << "storage index " << i << " (row " << r << ", column " << c << ")";
  }
}

TEST_P(KvRowsTest, EveryReaderSeesTheRowsOfTheRowLayout) {
  const int64_t n = 150;
  const auto rows = RandomFloats(n * kWidth, 2);
  const KvRows plain = Filled(GetParam(), KvLayout::kRows, rows);
  const KvRows lanes = Filled(GetParam(), KvLayout::kKeyLanes, rows);
  EXPECT_EQ(lanes, plain);
  EXPECT_EQ(lanes.bytes(), plain.bytes());
  std::vector<float> want = rows;
  for (float& x : want) x = Stored(x);
  EXPECT_EQ(lanes.ToF32(), want);
  for (auto [row0, count] : {std::pair<int64_t, int64_t>{0, n}, {7, 40}, {32, 16}, {149, 1}}) {
    std::vector<uint8_t> a(count * kWidth * KvDtypeBytes(GetParam()), 1), b(a.size(), 2);
    plain.CopyRowBytes(row0, count, a.data());
    lanes.CopyRowBytes(row0, count, b.data());
    EXPECT_EQ(a, b) << "rows " << row0 << " + " << count;
    std::vector<float> fa(count * kWidth), fb(count * kWidth, 1.0f);
    plain.CopyToF32(row0, count, fa.data());
    lanes.CopyToF32(row0, count, fb.data());
    EXPECT_EQ(fa, fb) << "rows " << row0 << " + " << count;
  }
  // Row bytes read back into either layout.
  std::vector<uint8_t> bytes(lanes.bytes());
  lanes.CopyRowBytes(0, n, bytes.data());
  for (KvLayout layout : {KvLayout::kRows, KvLayout::kKeyLanes}) {
    KvRows back(GetParam(), kWidth, layout);
    back.AppendRowBytes(bytes.data(), 100);
    back.AppendRowBytes(bytes.data() + 100 * kWidth * KvDtypeBytes(GetParam()), n - 100);
    EXPECT_EQ(back, plain);
  }
}

TEST_P(KvRowsTest, AppendRowsCopiesAnyRunBetweenLayouts) {
  const int64_t n = 200;
  const auto rows = RandomFloats(n * kWidth, 3);
  for (KvLayout from_layout : {KvLayout::kRows, KvLayout::kKeyLanes}) {
    const KvRows from = Filled(GetParam(), from_layout, rows);
    for (KvLayout to_layout : {KvLayout::kRows, KvLayout::kKeyLanes}) {
      // Runs that start on and off a block, with whole blocks and a tail.
      for (auto [have, row0, count] : {std::tuple<int64_t, int64_t, int64_t>{0, 0, 128},
                                       {32, 128, 40},
                                       {3, 16, 35},
                                       {16, 5, 70},
                                       {0, 190, 10}}) {
        KvRows to = Filled(GetParam(), to_layout,
                           std::vector<float>(rows.begin(), rows.begin() + have * kWidth));
        to.AppendRows(from, row0, count);
        std::vector<float> want(rows.begin(), rows.begin() + have * kWidth);
        want.insert(want.end(), rows.begin() + row0 * kWidth,
                    rows.begin() + (row0 + count) * kWidth);
        EXPECT_EQ(to, Filled(GetParam(), KvLayout::kRows, want))
            << "have " << have << ", rows " << row0 << " + " << count;
        // Same layout, same rows: the same storage, padding included.
        EXPECT_EQ(to, Filled(GetParam(), to_layout, want));
      }
    }
  }
}

TEST_P(KvRowsTest, ShrinkingZeroesTheDroppedRowsOfTheLastBlock) {
  const int64_t n = 60;
  const auto rows = RandomFloats(n * kWidth, 4);
  KvRows lanes = Filled(GetParam(), KvLayout::kKeyLanes, rows);
  lanes.Resize(21);
  lanes.Resize(40);  // rows 21..39 come back as zeros
  std::vector<float> want(rows.begin(), rows.begin() + 21 * kWidth);
  want.resize(40 * kWidth, 0.0f);
  KvRows fresh = Filled(GetParam(), KvLayout::kKeyLanes, want);
  EXPECT_EQ(lanes, fresh);
  ASSERT_EQ(lanes.bytes(), fresh.bytes());
  const int64_t storage = 3 * 16 * kWidth * KvDtypeBytes(GetParam());
  EXPECT_EQ(0, std::memcmp(lanes.mutable_data(), fresh.mutable_data(), storage));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvRowsTest, ::testing::Values(KvDtype::kF32, KvDtype::kBF16),
                         [](const ::testing::TestParamInfo<KvDtype>& info) {
                           return KvDtypeName(info.param);
                         });

}  // namespace
}  // namespace yoco
