// Softmax attention kernels against the double reference: blocked causal queries (prefill),
// with offsets and windows, and decode queries of many sequences.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "lib/engine/dtype.h"
#include "tests/kernels/random_inputs.h"
#include "tests/reference/reference_math.h"

namespace yoco {
namespace {

using testing::RandomFloats;
using testing::ToMat;

struct CausalCase {
  int64_t p0;
  int64_t T;
  int64_t window;
};

class CausalAttentionTest : public ::testing::TestWithParam<CausalCase> {};

TEST_P(CausalAttentionTest, MatchesReference) {
  const CausalCase c = GetParam();
  const cpu::GqaShape shape{4, 2, 32};
  const int d = shape.head_dim;
  const int64_t D = shape.q_heads * d, KV = shape.kv_heads * d;
  const int64_t n = c.p0 + c.T;
  const auto q = RandomFloats(c.T * D, 31, -3.0f, 3.0f);
  const auto k = RandomFloats(n * KV, 32);
  const auto v = RandomFloats(n * KV, 33);
  std::vector<float> out(c.T * D), scratch;
  cpu::CausalAttention(shape, c.p0, c.T, q.data(), D, k.data(), v.data(), KV, c.window, out.data(),
                       D, &scratch);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t t = 0; t < c.T; ++t) {
    const int64_t pos = c.p0 + t;
    const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
    for (int h = 0; h < shape.q_heads; ++h) {
      const int kvh = h / 2;
      const std::vector<double> qd(q.begin() + t * D + h * d, q.begin() + t * D + (h + 1) * d);
      const auto want = reference::Attention(
          qd, ToMat(k.data() + first * KV, pos - first + 1, d, KV, kvh * d),
          ToMat(v.data() + first * KV, pos - first + 1, d, KV, kvh * d), scale);
      for (int j = 0; j < d; ++j)
        ASSERT_NEAR(out[t * D + h * d + j], want[j], 2e-5) << "t=" << t << " h=" << h;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CausalAttentionTest,
                         ::testing::Values(CausalCase{0, 1, 0}, CausalCase{0, 64, 0},
                                           CausalCase{0, 150, 0}, CausalCase{37, 100, 0},
                                           CausalCase{0, 200, 16}, CausalCase{15, 130, 16},
                                           CausalCase{300, 5, 0}));

// Makes `query` read bf16 copies of its K/V rows (k16, v16) and rounds the fp32 rows to the
// same values, which are what a reference then attends over.
void ReadBf16Rows(std::vector<float>* k, std::vector<float>* v, std::vector<uint16_t>* k16,
                  std::vector<uint16_t>* v16, cpu::DecodeQuery* query) {
  for (auto [rows, bits] : {std::pair{k, k16}, std::pair{v, v16}}) {
    for (float& x : *rows) {
      bits->push_back(FloatToBf16(x));
      x = Bf16ToFloat(bits->back());
    }
  }
  query->keys = query->values = nullptr;
  query->keys_bf16 = k16->data();
  query->values_bf16 = v16->data();
}

// Keys as the decode kernel reads them in lanes (cpu::kKeyLaneRows-row blocks, each
// [width][kKeyLaneRows], the last one zero-padded), built from row-major keys element by element.
template <typename T>
std::vector<T> InLanes(const std::vector<T>& rows, int64_t width) {
  const int64_t n = static_cast<int64_t>(rows.size()) / width;
  const int64_t L = cpu::kKeyLaneRows;
  std::vector<T> lanes((n + L - 1) / L * L * width, T{});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < width; ++c)
      lanes[(r / L) * L * width + c * L + r % L] = rows[r * width + c];
  return lanes;
}

// Makes `query` read its keys in lanes, copied into *k_lanes (fp32) or *k16_lanes (bf16).
void ReadKeysInLanes(const std::vector<float>& k, const std::vector<uint16_t>& k16, int64_t width,
                     std::vector<float>* k_lanes, std::vector<uint16_t>* k16_lanes,
                     cpu::DecodeQuery* query) {
  if (query->keys_bf16 != nullptr) {
    *k16_lanes = InLanes(k16, width);
    query->keys_bf16 = k16_lanes->data();
  } else {
    *k_lanes = InLanes(k, width);
    query->keys = k_lanes->data();
  }
  query->keys_in_lanes = true;
}

// Values as the decode kernel reads them in strips, built in storage order: blocks of
// cpu::kValueStripRows rows (the last one zero-padded), each cut into strips of
// cpu::kValueStripWidth columns (the last one narrower), each strip its rows in order.
template <typename T>
std::vector<T> InStrips(const std::vector<T>& rows, int64_t width) {
  const int64_t n = static_cast<int64_t>(rows.size()) / width;
  const int64_t B = cpu::kValueStripRows, W = cpu::kValueStripWidth;
  std::vector<T> strips;
  for (int64_t r0 = 0; r0 < n; r0 += B)
    for (int64_t c0 = 0; c0 < width; c0 += W)
      for (int64_t r = r0; r < r0 + B; ++r)
        for (int64_t c = c0; c < std::min(c0 + W, width); ++c)
          strips.push_back(r < n ? rows[r * width + c] : T{});
  return strips;
}

// Makes `query` read its values in strips, copied into *v_strips (fp32) or *v16_strips (bf16).
void ReadValuesInStrips(const std::vector<float>& v, const std::vector<uint16_t>& v16,
                        int64_t width, std::vector<float>* v_strips,
                        std::vector<uint16_t>* v16_strips, cpu::DecodeQuery* query) {
  if (query->values_bf16 != nullptr) {
    *v16_strips = InStrips(v16, width);
    query->values_bf16 = v16_strips->data();
  } else {
    *v_strips = InStrips(v, width);
    query->values = v_strips->data();
  }
  query->values_in_strips = true;
}

// K/V rows held as fp32, or as bf16 (the reference then attends over the same rounded values,
// so the tolerance is the fp32 one); keys row-major or in lanes, values row-major or in strips.
struct DecodeCase {
  bool bf16;
  bool lanes;
  bool strips;
};

class DecodeAttentionTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeAttentionTest, ManySequencesOfDifferentLengthsMatchReference) {
  const auto [bf16, lanes, strips] = GetParam();
  // Lengths below, at and across the per-task key range, with and without whole 8- and 16-key
  // blocks and beyond the prefetch distance; head dims and group sizes that take each register
  // tile (d multiple of 64, of 16 only, of 4 only; groups of 1 to 5 heads).
  for (const cpu::GqaShape shape :
       {cpu::GqaShape{12, 4, 64}, cpu::GqaShape{4, 4, 32}, cpu::GqaShape{6, 2, 20},
        cpu::GqaShape{8, 2, 128}, cpu::GqaShape{10, 2, 64}, cpu::GqaShape{4, 2, 48},
        cpu::GqaShape{3, 1, 13}}) {
    const int d = shape.head_dim;
    const int64_t D = shape.q_heads * d, KV = shape.kv_heads * d;
    const std::vector<int64_t> lengths = {1, 7, 8, 300, 512, 513, 1500};
    for (int64_t batch : {int64_t{1}, int64_t{2}, static_cast<int64_t>(lengths.size())}) {
      std::vector<std::vector<float>> q(batch), k(batch), v(batch), out(batch);
      std::vector<std::vector<uint16_t>> k16(batch), v16(batch), k16_lanes(batch);
      std::vector<std::vector<float>> k_lanes(batch), v_strips(batch);
      std::vector<std::vector<uint16_t>> v16_strips(batch);
      std::vector<cpu::DecodeQuery> queries(batch);
      for (int64_t s = 0; s < batch; ++s) {
        const int64_t n = batch == 1 ? 1500 : lengths[s];
        q[s] = RandomFloats(D, 40 + s, -3.0f, 3.0f);
        k[s] = RandomFloats(n * KV, 50 + s);
        v[s] = RandomFloats(n * KV, 60 + s);
        out[s].assign(D, 0.0f);
        queries[s] = {q[s].data(), k[s].data(), v[s].data(), n, out[s].data()};
        if (bf16) ReadBf16Rows(&k[s], &v[s], &k16[s], &v16[s], &queries[s]);
        if (lanes) ReadKeysInLanes(k[s], k16[s], KV, &k_lanes[s], &k16_lanes[s], &queries[s]);
        if (strips) ReadValuesInStrips(v[s], v16[s], KV, &v_strips[s], &v16_strips[s], &queries[s]);
      }
      cpu::DecodeAttentionScratch scratch;
      cpu::DecodeAttention(shape, queries.data(), batch, &scratch);
      for (int64_t s = 0; s < batch; ++s) {
        const int64_t n = queries[s].n;
        for (int h = 0; h < shape.q_heads; ++h) {
          const int kvh = h / (shape.q_heads / shape.kv_heads);
          const std::vector<double> qd(q[s].begin() + h * d, q[s].begin() + (h + 1) * d);
          const auto want =
              reference::Attention(qd, ToMat(k[s].data(), n, d, KV, kvh * d),
                                   ToMat(v[s].data(), n, d, KV, kvh * d), 1.0 / std::sqrt(d));
          for (int j = 0; j < d; ++j) {
            ASSERT_NEAR(out[s][h * d + j], want[j], 2e-5)
                << "d=" << d << " batch " << batch << " seq " << s << " head " << h;
          }
        }
      }
    }
  }
}

// A query's output is the same bits alone as in any batch, so a sequence's tokens cannot depend
// on the sequences it is batched with: its keys are split into the same ranges whatever the
// batch (here lengths across one and many ranges; batches that split work by sequence and by
// range).
TEST_P(DecodeAttentionTest, AQueryGivesTheSameBitsAloneAsInAnyBatch) {
  const auto [bf16, lanes, strips] = GetParam();
  const cpu::GqaShape shape{12, 4, 64};
  const int64_t D = shape.q_heads * shape.head_dim, KV = shape.kv_heads * shape.head_dim;
  constexpr int64_t kMost = 48;
  std::vector<std::vector<float>> q(kMost), k(kMost), v(kMost), out(kMost);
  std::vector<std::vector<uint16_t>> k16(kMost), v16(kMost), k16_lanes(kMost);
  std::vector<std::vector<float>> k_lanes(kMost), v_strips(kMost);
  std::vector<std::vector<uint16_t>> v16_strips(kMost);
  std::vector<cpu::DecodeQuery> queries(kMost);
  for (int64_t s = 0; s < kMost; ++s) {
    const int64_t n = std::vector<int64_t>{1500, 600, 2100, 33, 4100}[s % 5];
    q[s] = RandomFloats(D, 140 + s, -3.0f, 3.0f);
    k[s] = RandomFloats(n * KV, 150 + s);
    v[s] = RandomFloats(n * KV, 160 + s);
    out[s].assign(D, 0.0f);
    queries[s] = {q[s].data(), k[s].data(), v[s].data(), n, out[s].data()};
    if (bf16) ReadBf16Rows(&k[s], &v[s], &k16[s], &v16[s], &queries[s]);
    if (lanes) ReadKeysInLanes(k[s], k16[s], KV, &k_lanes[s], &k16_lanes[s], &queries[s]);
    if (strips) ReadValuesInStrips(v[s], v16[s], KV, &v_strips[s], &v16_strips[s], &queries[s]);
  }
  cpu::DecodeAttentionScratch scratch;
  std::vector<std::vector<float>> alone(kMost);
  for (int64_t s = 0; s < kMost; ++s) {
    cpu::DecodeAttention(shape, &queries[s], 1, &scratch);
    alone[s] = out[s];
  }
  for (int64_t batch : {int64_t{2}, int64_t{5}, int64_t{16}, kMost}) {
    for (auto& o : out) o.assign(D, -1.0f);
    cpu::DecodeAttention(shape, queries.data(), batch, &scratch);
    for (int64_t s = 0; s < batch; ++s) {
      ASSERT_EQ(0, std::memcmp(alone[s].data(), out[s].data(), D * sizeof(float)))
          << "batch " << batch << " query " << s << " (" << queries[s].n << " keys)";
    }
  }
}

// Values in strips are summed in the same order as in rows: the same bits, for every tile (d a
// multiple of 64, of 32 only, neither; strips that hold parts of heads and whole heads).
TEST(DecodeAttentionStripsTest, ValuesInStripsGiveTheSameBitsAsValuesInRows) {
  for (bool bf16 : {false, true}) {
    for (const cpu::GqaShape shape :
         {cpu::GqaShape{12, 4, 64}, cpu::GqaShape{8, 2, 128}, cpu::GqaShape{4, 4, 32},
          cpu::GqaShape{4, 2, 48}, cpu::GqaShape{3, 1, 13}}) {
      const int d = shape.head_dim;
      const int64_t D = shape.q_heads * d, KV = shape.kv_heads * d;
      for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{700}}) {
        std::vector<float> q = RandomFloats(D, 70, -3.0f, 3.0f), k = RandomFloats(n * KV, 71),
                           v = RandomFloats(n * KV, 72), rows_out(D), strips_out(D, -1.0f);
        std::vector<uint16_t> k16, v16, v16_strips;
        std::vector<float> v_strips;
        cpu::DecodeQuery rows{q.data(), k.data(), v.data(), n, rows_out.data()};
        if (bf16) ReadBf16Rows(&k, &v, &k16, &v16, &rows);
        cpu::DecodeQuery in_strips = rows;
        in_strips.out = strips_out.data();
        ReadValuesInStrips(v, v16, KV, &v_strips, &v16_strips, &in_strips);
        cpu::DecodeAttentionScratch scratch;
        cpu::DecodeAttention(shape, &rows, 1, &scratch);
        cpu::DecodeAttention(shape, &in_strips, 1, &scratch);
        ASSERT_EQ(0, std::memcmp(rows_out.data(), strips_out.data(), D * sizeof(float)))
            << (bf16 ? "bf16" : "f32") << " d=" << d << " n=" << n;
      }
    }
  }
}

// Storage cut into blocks of block_rows rows, each in its own allocation (made in reverse, so
// they do not follow each other in memory), zero-padded to a whole block.
template <typename T>
std::vector<std::vector<T>> CutIntoBlocks(const std::vector<T>& storage, int64_t block_rows,
                                          int64_t width) {
  const int64_t block_values = block_rows * width;
  const int64_t blocks = (static_cast<int64_t>(storage.size()) + block_values - 1) / block_values;
  std::vector<std::vector<T>> out(blocks);
  for (int64_t b = blocks - 1; b >= 0; --b) {
    out[b].assign(block_values, T{});
    const int64_t end = std::min<int64_t>(storage.size(), (b + 1) * block_values);
    std::copy(storage.begin() + b * block_values, storage.begin() + end, out[b].begin());
  }
  return out;
}

template <typename T>
std::vector<const void*> TableOf(const std::vector<std::vector<T>>& blocks) {
  std::vector<const void*> table;
  for (const auto& b : blocks) table.push_back(b.data());
  return table;
}

// Paged K/V (the chunks of KvRows, shared between sequences) gives the bits of the same rows in
// one array, for every dtype and layout, and block sizes below, at and above a key range.
TEST(DecodeAttentionPagedTest, BlocksGiveTheBitsOfOneArray) {
  const cpu::GqaShape shape{8, 2, 64};
  const int64_t D = shape.q_heads * shape.head_dim, KV = shape.kv_heads * shape.head_dim;
  for (bool bf16 : {false, true}) {
    for (bool lanes : {false, true}) {
      for (bool strips : {false, true}) {
        for (int64_t n : {int64_t{1}, int64_t{127}, int64_t{129}, int64_t{700}, int64_t{1500}}) {
          std::vector<float> q = RandomFloats(D, 80, -3.0f, 3.0f), k = RandomFloats(n * KV, 81),
                             v = RandomFloats(n * KV, 82), array_out(D);
          std::vector<uint16_t> k16, v16, k16_lanes, v16_strips;
          std::vector<float> k_lanes, v_strips;
          cpu::DecodeQuery array{q.data(), k.data(), v.data(), n, array_out.data()};
          if (bf16) ReadBf16Rows(&k, &v, &k16, &v16, &array);
          if (lanes) ReadKeysInLanes(k, k16, KV, &k_lanes, &k16_lanes, &array);
          if (strips) ReadValuesInStrips(v, v16, KV, &v_strips, &v16_strips, &array);
          cpu::DecodeAttentionScratch scratch;
          cpu::DecodeAttention(shape, &array, 1, &scratch);
          for (int64_t block_rows : {int64_t{32}, int64_t{128}, int64_t{512}, int64_t{2048}}) {
            std::vector<float> paged_out(D, -1.0f);
            cpu::DecodeQuery paged{q.data(), nullptr, nullptr, n, paged_out.data()};
            paged.keys_in_lanes = lanes;
            paged.values_in_strips = strips;
            paged.block_rows = block_rows;
            paged.blocks_bf16 = bf16;
            std::vector<std::vector<float>> kb, vb;
            std::vector<std::vector<uint16_t>> kb16, vb16;
            std::vector<const void*> key_table, value_table;
            if (bf16) {
              kb16 = CutIntoBlocks(lanes ? k16_lanes : k16, block_rows, KV);
              vb16 = CutIntoBlocks(strips ? v16_strips : v16, block_rows, KV);
              key_table = TableOf(kb16);
              value_table = TableOf(vb16);
            } else {
              kb = CutIntoBlocks(lanes ? k_lanes : k, block_rows, KV);
              vb = CutIntoBlocks(strips ? v_strips : v, block_rows, KV);
              key_table = TableOf(kb);
              value_table = TableOf(vb);
            }
            paged.key_blocks = key_table.data();
            paged.value_blocks = value_table.data();
            cpu::DecodeAttention(shape, &paged, 1, &scratch);
            ASSERT_EQ(0, std::memcmp(array_out.data(), paged_out.data(), D * sizeof(float)))
                << (bf16 ? "bf16" : "f32") << (lanes ? " keys in lanes" : "")
                << (strips ? " values in strips" : "") << " n=" << n
                << " block_rows=" << block_rows;
          }
        }
      }
    }
  }
}

// Queries whose K/V share blocks (questions on one document: the same chunks, then tails of
// their own) are read together, block by block, and each gets the bits it gets alone. Shapes:
// groups of 4, 2 (yoco-tiny), 3 and 1 query heads per KV head (the rows of a shared block are
// taken several members at a time, in passes that split groups), and head dims for the 64- and
// 32-column value tiles and for none.
TEST(DecodeAttentionPagedTest, QueriesSharingBlocksGiveTheirBitsAlone) {
  const std::vector<cpu::GqaShape> shapes = {{8, 2, 64}, {4, 2, 64}, {6, 2, 64},
                                             {3, 3, 64}, {4, 2, 32}, {4, 2, 48}};
  for (const cpu::GqaShape& shape : shapes) {
    SCOPED_TRACE(::testing::Message()
                 << "shape " << shape.q_heads << "/" << shape.kv_heads << "/" << shape.head_dim);
    const int64_t D = shape.q_heads * shape.head_dim, KV = shape.kv_heads * shape.head_dim;
    const int64_t B = 128;  // rows per block
    for (bool bf16 : {false, true}) {
      // A document of 1100 rows (8 full blocks, then 76 rows) in lanes and strips, cut into
      // blocks; each query reads the document's first `shared` rows from those blocks, then rows
      // of its own up to n.
      struct Query {
        int64_t shared, n;
      };
      // The last two end inside the document's blocks at the same row: they share a range of
      // 488 rows (not a whole number of blocks of keys or of values).
      const std::vector<Query> plan = {{1024, 1500}, {1024, 1030}, {1024, 2100},
                                       {256, 700},   {0, 900},     {1024, 1024},
                                       {512, 1500},  {1024, 1000}, {1024, 1000}};
      std::vector<std::vector<float>> own_k, own_v;  // per query: all its rows (fp32 or bf16 bits)
      std::vector<std::vector<uint16_t>> own_k16, own_v16;
      const std::vector<float> doc_k = RandomFloats(2100 * KV, 90),
                               doc_v = RandomFloats(2100 * KV, 91);
      std::vector<std::vector<std::vector<float>>> kb(plan.size()), vb(plan.size());
      std::vector<std::vector<std::vector<uint16_t>>> kb16(plan.size()), vb16(plan.size());
      std::vector<std::vector<const void*>> key_tables(plan.size()), value_tables(plan.size());
      std::vector<std::vector<float>> qs, outs(plan.size(), std::vector<float>(D)),
          alone(plan.size(), std::vector<float>(D));
      std::vector<cpu::DecodeQuery> queries(plan.size());
      for (size_t i = 0; i < plan.size(); ++i) {
        const int64_t n = plan[i].n;
        std::vector<float> k = RandomFloats(n * KV, 100 + i), v = RandomFloats(n * KV, 200 + i);
        const int64_t from_doc = std::min(plan[i].shared, n);
        std::copy(doc_k.begin(), doc_k.begin() + from_doc * KV, k.begin());
        std::copy(doc_v.begin(), doc_v.begin() + from_doc * KV, v.begin());
        std::vector<uint16_t> k16, v16;
        cpu::DecodeQuery q{nullptr, k.data(), v.data(), n, nullptr};
        if (bf16) ReadBf16Rows(&k, &v, &k16, &v16, &q);
        std::vector<float> k_lanes, v_strips;
        std::vector<uint16_t> k16_lanes, v16_strips;
        ReadKeysInLanes(k, k16, KV, &k_lanes, &k16_lanes, &q);
        ReadValuesInStrips(v, v16, KV, &v_strips, &v16_strips, &q);
        if (bf16) {
          kb16[i] = CutIntoBlocks(k16_lanes, B, KV);
          vb16[i] = CutIntoBlocks(v16_strips, B, KV);
          key_tables[i] = TableOf(kb16[i]);
          value_tables[i] = TableOf(vb16[i]);
        } else {
          kb[i] = CutIntoBlocks(k_lanes, B, KV);
          vb[i] = CutIntoBlocks(v_strips, B, KV);
          key_tables[i] = TableOf(kb[i]);
          value_tables[i] = TableOf(vb[i]);
        }
        qs.push_back(RandomFloats(D, 300 + i, -3.0f, 3.0f));
      }
      // The shared rows' blocks are the first query's (same memory), as chunks of one document.
      for (size_t i = 1; i < plan.size(); ++i) {
        for (int64_t b = 0; b < std::min(plan[i].shared, plan[i].n + B - 1) / B; ++b) {
          key_tables[i][b] = key_tables[0][b];
          value_tables[i][b] = value_tables[0][b];
        }
      }
      for (size_t i = 0; i < plan.size(); ++i) {
        cpu::DecodeQuery& q = queries[i];
        q = cpu::DecodeQuery{qs[i].data(), nullptr, nullptr, plan[i].n, outs[i].data()};
        q.key_blocks = key_tables[i].data();
        q.value_blocks = value_tables[i].data();
        q.block_rows = B;
        q.blocks_bf16 = bf16;
        q.keys_in_lanes = q.values_in_strips = true;
      }
      cpu::DecodeAttentionScratch scratch;
      cpu::DecodeAttention(shape, queries.data(), static_cast<int64_t>(queries.size()), &scratch);
      EXPECT_GT(scratch.group_begin.size(), 1u) << "no range was read for several queries";
      // Every range that another query reads through the same blocks (as many rows, the same
      // K and V blocks), and only those, is read in a group.
      constexpr int64_t kRange = 512;  // the kernel's keys per range
      for (size_t i = 0; i < plan.size(); ++i) {
        for (int64_t begin = 0; begin < plan[i].n; begin += kRange) {
          const int64_t end = std::min(plan[i].n, begin + kRange);
          bool shareable = false;
          for (size_t j = 0; j < plan.size() && !shareable; ++j) {
            if (j == i || std::min(plan[j].n, begin + kRange) != end || plan[j].n <= begin)
              continue;
            shareable = true;
            for (int64_t b = begin / B; b <= (end - 1) / B; ++b) {
              shareable = shareable && key_tables[i][b] == key_tables[j][b] &&
                          value_tables[i][b] == value_tables[j][b];
            }
          }
          const int64_t r = scratch.first_range[i] + begin / kRange;
          EXPECT_EQ(shareable, scratch.group_of[r] >= 0)
              << "query " << i << ", rows from " << begin;
        }
      }
      for (size_t i = 0; i < plan.size(); ++i) {
        cpu::DecodeQuery q = queries[i];
        q.out = alone[i].data();
        cpu::DecodeAttention(shape, &q, 1, &scratch);
        ASSERT_EQ(0, std::memcmp(alone[i].data(), outs[i].data(), D * sizeof(float)))
            << (bf16 ? "bf16" : "f32") << " query " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    KvDtypesAndLayouts, DecodeAttentionTest,
    ::testing::Values(DecodeCase{false, false, false}, DecodeCase{true, false, false},
                      DecodeCase{false, true, false}, DecodeCase{true, true, false},
                      DecodeCase{false, true, true}, DecodeCase{true, true, true}),
    [](const ::testing::TestParamInfo<DecodeCase>& info) {
      return std::string(info.param.bf16 ? "bf16" : "f32") +
             (info.param.lanes ? "KeysInLanes" : "KeyRows") +
             (info.param.strips ? "ValuesInStrips" : "");
    });

}  // namespace
}  // namespace yoco
