// Header encoding, field by field, so the bytes do not depend on the compiler's struct layout.
#include "lib/transport/ucx_wire.h"

namespace yoco {
namespace {

class Writer {
 public:
  explicit Writer(size_t bytes) { out_.reserve(bytes); }
  Writer& U32(uint32_t v) { return Put(v, 4); }
  Writer& U64(uint64_t v) { return Put(v, 8); }
  template <size_t N>
  Writer& Bytes(const std::array<uint8_t, N>& b) {
    out_.insert(out_.end(), b.begin(), b.end());
    return *this;
  }
  Writer& U8(uint8_t v) { return Put(v, 1); }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  Writer& Put(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(const void* bytes) : at_(static_cast<const uint8_t*>(bytes)) {}
  uint32_t U32() { return static_cast<uint32_t>(Get(4)); }
  uint64_t U64() { return Get(8); }
  uint8_t U8() { return static_cast<uint8_t>(Get(1)); }
  template <size_t N>
  void Bytes(std::array<uint8_t, N>& b) {
    for (uint8_t& x : b) x = *at_++;
  }

 private:
  uint64_t Get(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(at_[i]) << (8 * i);
    at_ += bytes;
    return v;
  }
  const uint8_t* at_;
};

}  // namespace

std::vector<uint8_t> Encode(const DataHeader& h) {
  Writer w(DataHeader::kBytes + DataHeader::kTraceBytes);
  w.U64(h.sender)
      .U64(h.id)
      .U64(h.size)
      .U32(h.crc)
      .U32(h.timeout_ms)
      .U64(h.host)
      .U32(h.sender_pid)
      .U32(h.flags);
  if (h.flags & DataHeader::kHasTrace) w.Bytes(h.trace_id).Bytes(h.span_id).U8(h.trace_flags);
  return w.Take();
}

std::vector<uint8_t> Encode(const ReplyHeader& h) {
  return Writer(ReplyHeader::kBytes)
      .U64(h.id)
      .U32(static_cast<uint32_t>(h.code))
      .U32(0)  // reserved
      .Take();
}

std::vector<uint8_t> Encode(const CancelHeader& h) {
  return Writer(CancelHeader::kBytes).U64(h.sender).U64(h.id).Take();
}

std::optional<DataHeader> DecodeDataHeader(const void* bytes, size_t length) {
  if (length < DataHeader::kBytes) return std::nullopt;
  Reader r(bytes);
  DataHeader h;
  h.sender = r.U64();
  h.id = r.U64();
  h.size = r.U64();
  h.crc = r.U32();
  h.timeout_ms = r.U32();
  h.host = r.U64();
  h.sender_pid = r.U32();
  h.flags = r.U32();
  const bool traced = h.flags & DataHeader::kHasTrace;
  if (length != DataHeader::kBytes + (traced ? DataHeader::kTraceBytes : 0)) return std::nullopt;
  if (traced) {
    r.Bytes(h.trace_id);
    r.Bytes(h.span_id);
    h.trace_flags = r.U8();
  }
  return h;
}

std::optional<ReplyHeader> DecodeReplyHeader(const void* bytes, size_t length) {
  if (length != ReplyHeader::kBytes) return std::nullopt;
  Reader r(bytes);
  ReplyHeader h;
  h.id = r.U64();
  h.code = static_cast<int32_t>(r.U32());
  return h;
}

std::optional<CancelHeader> DecodeCancelHeader(const void* bytes, size_t length) {
  if (length != CancelHeader::kBytes) return std::nullopt;
  Reader r(bytes);
  CancelHeader h;
  h.sender = r.U64();
  h.id = r.U64();
  return h;
}

}  // namespace yoco
