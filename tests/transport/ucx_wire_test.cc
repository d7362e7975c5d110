// The active messages' headers: encoded bytes are the layout earlier versions sent (their structs
// copied as they were, on little-endian x86-64), so old and new workers interoperate; decoding
// round-trips and refuses a header of another length.
#include "lib/transport/ucx_wire.h"

#include <gtest/gtest.h>

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
