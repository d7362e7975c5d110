// The headers of UcxTransport's three active messages, as bytes on the wire:
//   DATA   sender -> receiver: DataHeader + payload (eager or rendezvous)
//   REPLY  receiver -> sender: ReplyHeader + message text: the verdict (OK, or why not)
//   CANCEL sender -> receiver: CancelHeader: drop this transfer
// Fields are little-endian at fixed offsets with no padding (the layout of the packed structs
// that earlier versions copied as they were, so old and new workers still understand each
// other). Decoding checks the length, so a message of another size is not ours. A DATA header
// with kHasTrace carries the sender's W3C trace context after its 48 bytes; receivers older
// than that refuse it, so a sender adds it only for a receiver that said it reads it.
#ifndef YOCO_LIB_TRANSPORT_UCX_WIRE_H_
#define YOCO_LIB_TRANSPORT_UCX_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace yoco {

// UCP active message ids.
enum UcxMessageId : unsigned { kUcxData = 1, kUcxReply = 2, kUcxCancel = 3 };

struct DataHeader {
  static constexpr size_t kBytes = 48;
  static constexpr uint32_t kHasChecksum = 1;  // in `flags`: `crc` is the payload's CRC32C
  static constexpr uint32_t kHasTrace = 2;     // in `flags`: the trace fields follow
  static constexpr size_t kTraceBytes = 25;    // trace id, span id, W3C trace flags

  uint64_t sender = 0;  // the sending transport's id
  uint64_t id = 0;      // the transfer's id, unique per sender
  uint64_t size = 0;    // payload bytes
  uint32_t crc = 0;
  uint32_t timeout_ms = 0;
  uint64_t host = 0;        // HostId() of the sender
  uint32_t sender_pid = 0;  // lets a receiver on the same host notice that the sender exited
  uint32_t flags = 0;
  // With kHasTrace: the sender's span, the parent of the receiver's span for the transfer.
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  uint8_t trace_flags = 0;  // bit 0: sampled

  bool operator==(const DataHeader&) const = default;
};

struct ReplyHeader {
  static constexpr size_t kBytes = 16;

  uint64_t id = 0;
  int32_t code = 0;  // absl::StatusCode

  bool operator==(const ReplyHeader&) const = default;
};

struct CancelHeader {
  static constexpr size_t kBytes = 16;

  uint64_t sender = 0;
  uint64_t id = 0;

  bool operator==(const CancelHeader&) const = default;
};

std::vector<uint8_t> Encode(const DataHeader& h);
std::vector<uint8_t> Encode(const ReplyHeader& h);
std::vector<uint8_t> Encode(const CancelHeader& h);

// None when `length` is not the header's size (for DATA: with or without the trace fields, as
// its flags say).
std::optional<DataHeader> DecodeDataHeader(const void* bytes, size_t length);
std::optional<ReplyHeader> DecodeReplyHeader(const void* bytes, size_t length);
std::optional<CancelHeader> DecodeCancelHeader(const void* bytes, size_t length);

}  // namespace yoco

#endif  // YOCO_LIB_TRANSPORT_UCX_WIRE_H_
