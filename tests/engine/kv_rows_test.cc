// KvRows in every layout: keys in lanes and values in strips are stored where the decode kernel
// reads them, with zero padding, and every reader that is not an attention kernel (row bytes,
// fp32 copies, appends from any layout, equality) sees the same rows as the row-major layout.
#include "lib/engine/kv_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "lib/engine/dtype.h"
#include "tests/kernels/random_inputs.h"

namespace yoco {
namespace {

using testing::RandomFloats;

constexpr int64_t kWidth = 88;  // a whole strip of values and a narrower one
constexpr KvLayout kLayouts[] = {KvLayout::kRows, KvLayout::kKeyLanes, KvLayout::kValueStrips};

class KvRowsTest : public ::testing::TestWithParam<KvDtype> {
 protected:
  // The value stored for x: itself, or its bf16 rounding.
  float Stored(float x) const {
    return GetParam() == KvDtype::kF32 ? x : Bf16ToFloat(FloatToBf16(x));
  }
};

// Storage value i of a KvRows' first chunk, widened.
float StoredAt(const KvRows& kv, int64_t i) {
  if (kv.dtype() == KvDtype::kF32) {
    float f;
    std::memcpy(&f, kv.chunk_data(0) + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, kv.chunk_data(0) + 2 * i, 2);
  return Bf16ToFloat(h);
}

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
    const float got = StoredAt(lanes, i);
    const float want = r < n ? Stored(rows[r * kWidth + c]) : 0.0f;
    ASSERT_EQ(got, want) << "storage index " << i << " (row " << r << ", column " << c << ")";
  }
}

// Built in storage order: blocks of 32 rows, each cut into strips of 64 columns (the last one 24
// wide), each strip its rows in order.
TEST_P(KvRowsTest, ValuesInStripsAreStoredBlockByStripWithZeroPadding) {
  ASSERT_EQ(cpu::kValueStripRows, 32);
  ASSERT_EQ(cpu::kValueStripWidth, 64);
  const int64_t n = 75;  // two whole blocks of 32 and eleven rows
  const auto rows = RandomFloats(n * kWidth, 5);
  const KvRows strips = Filled(GetParam(), KvLayout::kValueStrips, rows);
  ASSERT_EQ(strips.rows(), n);
  std::vector<float> want;
  for (int64_t block = 0; block < 3; ++block)
    for (int64_t c0 : {0, 64})
      for (int64_t r = block * 32; r < block * 32 + 32; ++r)
        for (int64_t c = c0; c < std::min<int64_t>(c0 + 64, kWidth); ++c)
          want.push_back(r < n ? Stored(rows[r * kWidth + c]) : 0.0f);
  for (size_t i = 0; i < want.size(); ++i) {
    const float got = StoredAt(strips, i);
    ASSERT_EQ(got, want[i]) << "storage index " << i;
  }
}

using DtypeAndLayout = std::tuple<KvDtype, KvLayout>;

class KvRowsLayoutTest : public ::testing::TestWithParam<DtypeAndLayout> {
 protected:
  KvDtype dtype() const { return std::get<0>(GetParam()); }
  KvLayout layout() const { return std::get<1>(GetParam()); }
  float Stored(float x) const { return dtype() == KvDtype::kF32 ? x : Bf16ToFloat(FloatToBf16(x)); }
};

TEST_P(KvRowsLayoutTest, EveryReaderSeesTheRowsOfTheRowLayout) {
  const int64_t n = 150;
  const auto rows = RandomFloats(n * kWidth, 2);
  const KvRows plain = Filled(dtype(), KvLayout::kRows, rows);
  const KvRows kv = Filled(dtype(), layout(), rows);
  EXPECT_EQ(kv, plain);
  EXPECT_EQ(kv.bytes(), plain.bytes());
  std::vector<float> want = rows;
  for (float& x : want) x = Stored(x);
  EXPECT_EQ(kv.ToF32(), want);
  for (auto [row0, count] : {std::pair<int64_t, int64_t>{0, n}, {7, 40}, {32, 16}, {149, 1}}) {
    std::vector<uint8_t> a(count * kWidth * KvDtypeBytes(dtype()), 1), b(a.size(), 2);
    plain.CopyRowBytes(row0, count, a.data());
    kv.CopyRowBytes(row0, count, b.data());
    EXPECT_EQ(a, b) << "rows " << row0 << " + " << count;
    std::vector<float> fa(count * kWidth), fb(count * kWidth, 1.0f);
    plain.CopyToF32(row0, count, fa.data());
    kv.CopyToF32(row0, count, fb.data());
    EXPECT_EQ(fa, fb) << "rows " << row0 << " + " << count;
  }
  // Row bytes read back into every layout.
  std::vector<uint8_t> bytes(kv.bytes());
  kv.CopyRowBytes(0, n, bytes.data());
  for (KvLayout layout : kLayouts) {
    KvRows back(dtype(), kWidth, layout);
    back.AppendRowBytes(bytes.data(), 100);
    back.AppendRowBytes(bytes.data() + 100 * kWidth * KvDtypeBytes(dtype()), n - 100);
    EXPECT_EQ(back, plain);
  }
}

TEST_P(KvRowsLayoutTest, AppendRowsCopiesAnyRunBetweenLayouts) {
  const int64_t n = 200;
  const auto rows = RandomFloats(n * kWidth, 3);
  const KvRows from = Filled(dtype(), layout(), rows);
  for (KvLayout to_layout : kLayouts) {
    // Runs that start on and off a block, with whole blocks and a tail.
    for (auto [have, row0, count] : {std::tuple<int64_t, int64_t, int64_t>{0, 0, 128},
                                     {32, 128, 40},
                                     {3, 16, 35},
                                     {16, 5, 70},
                                     {0, 190, 10}}) {
      KvRows to = Filled(dtype(), to_layout,
                         std::vector<float>(rows.begin(), rows.begin() + have * kWidth));
      to.AppendRows(from, row0, count);
      std::vector<float> want(rows.begin(), rows.begin() + have * kWidth);
      want.insert(want.end(), rows.begin() + row0 * kWidth, rows.begin() + (row0 + count) * kWidth);
      EXPECT_EQ(to, Filled(dtype(), KvLayout::kRows, want))
          << "have " << have << ", rows " << row0 << " + " << count;
      // Same layout, same rows: the same storage, padding included.
      EXPECT_EQ(to, Filled(dtype(), to_layout, want));
    }
  }
}

TEST_P(KvRowsLayoutTest, ShrinkingZeroesTheDroppedRowsOfTheLastBlock) {
  const int64_t n = 60;
  const auto rows = RandomFloats(n * kWidth, 4);
  KvRows kv = Filled(dtype(), layout(), rows);
  kv.Resize(21);
  kv.Resize(40);  // rows 21..39 come back as zeros
  std::vector<float> want(rows.begin(), rows.begin() + 21 * kWidth);
  want.resize(40 * kWidth, 0.0f);
  KvRows fresh = Filled(dtype(), layout(), want);
  EXPECT_EQ(kv, fresh);
  ASSERT_EQ(kv.bytes(), fresh.bytes());
  const int64_t block = layout() == KvLayout::kKeyLanes      ? cpu::kKeyLaneRows
                        : layout() == KvLayout::kValueStrips ? cpu::kValueStripRows
                                                             : 1;
  const int64_t storage = (40 + block - 1) / block * block * kWidth * KvDtypeBytes(dtype());
  EXPECT_EQ(0, std::memcmp(kv.chunk_data(0), fresh.chunk_data(0), storage));
}

// Full chunks are shared, never written again: copies and appends of whole chunks reference
// them, and whatever a holder then does (append, shrink, corrupt) leaves the others' rows alone.
TEST_P(KvRowsLayoutTest, FullChunksAreSharedAndNeverWrittenAgain) {
  const int64_t C = KvRows::kChunkRows;
  const int64_t n = 2 * C + 40;
  const auto rows = RandomFloats((n + C) * kWidth, 6);
  const KvRows original =
      Filled(dtype(), layout(), std::vector<float>(rows.begin(), rows.begin() + n * kWidth));
  const KvRows reference =
      Filled(dtype(), layout(), std::vector<float>(rows.begin(), rows.begin() + n * kWidth));
  ASSERT_EQ(original.chunks(), 3);

  KvRows copy = original;
  EXPECT_EQ(copy.chunk_data(0), original.chunk_data(0));
  EXPECT_EQ(copy.chunk_data(1), original.chunk_data(1));
  EXPECT_NE(copy.chunk_data(2), original.chunk_data(2)) << "the partly filled chunk is copied";
  copy.Append(rows.data() + n * kWidth, C);  // fills the copied chunk and starts another
  copy.Resize(C + 3);                        // cuts into shared chunk 1
  copy.mutable_chunk_data(0)[0] ^= 0xFF;
  EXPECT_EQ(original, reference);

  KvRows prefix(dtype(), kWidth, layout());
  prefix.AppendRows(original, 0, 2 * C + 5);  // two whole chunks, then five rows copied
  EXPECT_EQ(prefix.chunk_data(0), original.chunk_data(0));
  EXPECT_EQ(prefix.chunk_data(1), original.chunk_data(1));
  EXPECT_NE(prefix.chunk_data(2), original.chunk_data(2));
  prefix.Append(rows.data(), 1);
  EXPECT_EQ(original, reference);
  KvRows want = Filled(dtype(), layout(),
                       std::vector<float>(rows.begin(), rows.begin() + (2 * C + 5) * kWidth));
  want.Append(rows.data(), 1);
  EXPECT_EQ(prefix, want);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvRowsTest, ::testing::Values(KvDtype::kF32, KvDtype::kBF16),
                         [](const ::testing::TestParamInfo<KvDtype>& info) {
                           return KvDtypeName(info.param);
                         });

std::string DtypeAndLayoutName(const ::testing::TestParamInfo<DtypeAndLayout>& info) {
  const char* layouts[] = {"Rows", "KeyLanes", "ValueStrips"};
  return KvDtypeName(std::get<0>(info.param)) + layouts[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(DtypesAndLayouts, KvRowsLayoutTest,
                         ::testing::Combine(::testing::Values(KvDtype::kF32, KvDtype::kBF16),
                                            ::testing::ValuesIn(kLayouts)),
                         DtypeAndLayoutName);

}  // namespace
}  // namespace yoco
