// The active messages' headers: encoded bytes are the layout earlier versions sent (their structs
// copied as they were, on little-endian x86-64), so old and new workers interoperate; decoding
// round-trips and refuses a header of another length.
#include "lib/transport/ucx_wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace yoco {
namespace {

// The structs the transport used to memcpy onto the wire.
struct LegacyData {
  uint64_t sender, id, size;
  uint32_t crc, timeout_ms;
  uint64_t host;
  uint32_t sender_pid, flags;
};
struct LegacyReply {
  uint64_t id;
  int32_t code;
  uint32_t reserved;
};
struct LegacyCancel {
  uint64_t sender, id;
};

template <typename T>
std::vector<uint8_t> Bytes(const T& t) {
  std::vector<uint8_t> out(sizeof t);
  std::memcpy(out.data(), &t, sizeof t);
  return out;
}

TEST(UcxWireTest, EncodesTheLayoutEarlierVersionsSent) {
  static_assert(sizeof(LegacyData) == DataHeader::kBytes);
  static_assert(sizeof(LegacyReply) == ReplyHeader::kBytes);
  static_assert(sizeof(LegacyCancel) == CancelHeader::kBytes);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100; ++i) {
    const LegacyData d{rng(),
                       rng(),
                       rng(),
                       static_cast<uint32_t>(rng()),
                       static_cast<uint32_t>(rng()),
                       rng(),
                       static_cast<uint32_t>(rng()),
                       static_cast<uint32_t>(rng() & 1)};
    EXPECT_EQ(Encode(DataHeader{d.sender, d.id, d.size, d.crc, d.timeout_ms, d.host, d.sender_pid,
                                d.flags}),
              Bytes(d));
    const LegacyReply r{rng(), static_cast<int32_t>(rng() % 17), 0};
    EXPECT_EQ(Encode(ReplyHeader{r.id, r.code}), Bytes(r));
    const LegacyCancel c{rng(), rng()};
    EXPECT_EQ(Encode(CancelHeader{c.sender, c.id}), Bytes(c));
  }
}

TEST(UcxWireTest, DecodesWhatItEncodes) {
  const DataHeader d{
      1, 2, 3ull << 40, 0xdeadbeef, 30000, 0x0102030405060708, 4242, DataHeader::kHasChecksum};
  const std::vector<uint8_t> bytes = Encode(d);
  EXPECT_EQ(DecodeDataHeader(bytes.data(), bytes.size()), d);
  const ReplyHeader r{99, 8};
  const std::vector<uint8_t> rb = Encode(r);
  EXPECT_EQ(DecodeReplyHeader(rb.data(), rb.size()), r);
  const CancelHeader c{7, 8};
  const std::vector<uint8_t> cb = Encode(c);
  EXPECT_EQ(DecodeCancelHeader(cb.data(), cb.size()), c);
}

// The trace fields follow the 48 bytes an untraced header has, unchanged, and only with the
// flag: a header whose length and flag disagree is not ours.
TEST(UcxWireTest, ATracedDataHeaderAppendsItsTraceContext) {
  DataHeader d{1, 2, 3, 4, 5, 6, 7, DataHeader::kHasChecksum | DataHeader::kHasTrace};
  for (size_t i = 0; i < d.trace_id.size(); ++i) d.trace_id[i] = static_cast<uint8_t>(0xa0 + i);
  for (size_t i = 0; i < d.span_id.size(); ++i) d.span_id[i] = static_cast<uint8_t>(0x10 + i);
  d.trace_flags = 1;
  const std::vector<uint8_t> bytes = Encode(d);
  ASSERT_EQ(bytes.size(), DataHeader::kBytes + DataHeader::kTraceBytes);
  DataHeader untraced{1, 2, 3, 4, 5, 6, 7, DataHeader::kHasChecksum | DataHeader::kHasTrace};
  std::vector<uint8_t> head = Encode(untraced);
  head.resize(DataHeader::kBytes);
  EXPECT_TRUE(std::equal(head.begin(), head.end(), bytes.begin()));
  EXPECT_EQ(bytes[48], 0xa0);
  EXPECT_EQ(bytes[64], 0x10);
  EXPECT_EQ(bytes[72], 1);
  EXPECT_EQ(DecodeDataHeader(bytes.data(), bytes.size()), d);
  EXPECT_FALSE(DecodeDataHeader(bytes.data(), DataHeader::kBytes).has_value());
  d.flags = DataHeader::kHasChecksum;  // the same 73 bytes without the flag
  std::vector<uint8_t> unflagged = bytes;
  unflagged[44] = static_cast<uint8_t>(DataHeader::kHasChecksum);
  EXPECT_FALSE(DecodeDataHeader(unflagged.data(), unflagged.size()).has_value());
  EXPECT_EQ(Encode(d).size(), DataHeader::kBytes);  // no flag: the trace fields are not sent
}

TEST(UcxWireTest, AHeaderOfAnotherLengthIsNotOurs) {
  const std::vector<uint8_t> bytes(64, 0xab);
  for (size_t n : {size_t{0}, size_t{15}, size_t{17}, size_t{47}, size_t{49}}) {
    EXPECT_FALSE(DecodeDataHeader(bytes.data(), n).has_value()) << n;
    EXPECT_FALSE(DecodeReplyHeader(bytes.data(), n).has_value()) << n;
    EXPECT_FALSE(DecodeCancelHeader(bytes.data(), n).has_value()) << n;
  }
  // A REPLY is never taken for a DATA header, nor the other way round.
  EXPECT_FALSE(DecodeDataHeader(bytes.data(), ReplyHeader::kBytes).has_value());
  EXPECT_FALSE(DecodeReplyHeader(bytes.data(), DataHeader::kBytes).has_value());
}

}  // namespace
}  // namespace yoco
