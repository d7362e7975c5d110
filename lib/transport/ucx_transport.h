// UcxTransport: moves byte buffers (state bundles) between workers over UCX active messages.
//
// A sender calls Send(peer address, buffer); the buffer is referenced until the receiver has
// verified the data and acknowledged it (or the transfer failed). Large buffers go by
// rendezvous, so UCX moves them without copies into a buffer the receiver allocated; small
// ones go eagerly. Every transfer has a deadline on both ends, cancellation is a message to the
// other side, and a peer that dies fails only its own transfers.
//
// Threading: one progress thread owns the UCX worker; every callback (ReceiveCallbacks, Send's
// `done`) runs on it and must not block. Public methods may be called from any thread.
#ifndef YOCO_LIB_TRANSPORT_UCX_TRANSPORT_H_
#define YOCO_LIB_TRANSPORT_UCX_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/trace/trace_context.h"
#include "lib/transport/transfer_metrics.h"

namespace yoco {

// An owned, uninitialised byte buffer (a 1 GiB bundle is not zero-filled before UCX writes it).
// By default heap memory; a receiver may supply memory of its own (a pool, the decode worker's
// cache) with a release function, or memory in segments (a bundle part's K/V chunks, so that
// UCX writes each where it stays).
class ByteBuffer {
 public:
  using Release = std::function<void(uint8_t*)>;
  struct Segment {
    uint8_t* data = nullptr;
    size_t size = 0;
  };

  ByteBuffer() = default;
  explicit ByteBuffer(size_t size)
      : data_(size ? new uint8_t[size] : nullptr, [](uint8_t* p) { delete[] p; }), size_(size) {}
  ByteBuffer(uint8_t* data, size_t size, Release release)
      : data_(data, std::move(release)), size_(size) {}
  // `segments` in order, kept alive by `owner`.
  ByteBuffer(std::vector<Segment> segments, std::shared_ptr<void> owner);

  // Whether the bytes are in segments; then data() is null and view() empty.
  bool segmented() const { return !segments_.empty(); }
  const std::vector<Segment>& segments() const { return segments_; }
  const std::shared_ptr<void>& owner() const { return owner_; }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  absl::string_view view() const { return {reinterpret_cast<const char*>(data_.get()), size_}; }

 private:
  std::unique_ptr<uint8_t, Release> data_{nullptr, [](uint8_t*) {}};
  size_t size_ = 0;
  std::vector<Segment> segments_;
  std::shared_ptr<void> owner_;
};

// Bytes to send and whatever keeps them alive; the transport holds `owner` until the transfer
// ends.
struct SendBuffer {
  const void* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

// Identifies a transfer on the receiving side: the sending transport's random id and its
// transfer number.
struct IncomingTransfer {
  uint64_t sender = 0;
  uint64_t id = 0;
  uint64_t size = 0;
  std::optional<TraceContext> trace;  // the sender's span, when it sent one (no tracestate)
  absl::Time started;                 // when its header arrived
};

struct ReceiveCallbacks {
  // Memory for an incoming transfer of `size` bytes (default: the heap), contiguous or in
  // segments. UCX writes the data straight into it; an error refuses the transfer.
  std::function<absl::StatusOr<ByteBuffer>(uint64_t size)> allocate;
  // Before any data: OK to accept, or an error (e.g. RESOURCE_EXHAUSTED) returned to the sender.
  std::function<absl::Status(const IncomingTransfer&)> on_start;
  // After the transport's own checksum matched: the content check (bundle checksum, version,
  // model fingerprint). An error is returned to the sender and the data is dropped.
  std::function<absl::Status(const IncomingTransfer&, const ByteBuffer& data)> verify;
  // Verified data, handed over.
  std::function<void(const IncomingTransfer&, ByteBuffer data)> on_received;
  // The transfer ended without data: peer died, deadline, cancelled by either side, refused.
  std::function<void(const IncomingTransfer&, const absl::Status&)> on_failed;
};

struct UcxTransportOptions {
  // UCX transports (UCX_TLS): "tcp", "sm", or a list; "self" is always added.
  std::string tls = "tcp";
  // UCX_NET_DEVICES (e.g. "lo" on loopback); empty: UCX's choice.
  std::string net_devices;
  // Buffers up to this size go eagerly, larger ones by rendezvous.
  size_t eager_limit = 16 << 10;
  // Largest transfer a receiver accepts.
  uint64_t max_receive_bytes = uint64_t{4} << 30;
  // CRC-32C over every sent buffer, checked by the receiver before `verify`. Payloads that
  // carry their own checksum (state bundles) can turn it off: it costs a pass over the data on
  // each side.
  bool checksum = true;
  // The cluster's transport key (ReadKeyFile): this transport's address is sealed with it
  // and only addresses sealed with it are connected to (see transport_address.h). Empty: the
  // seal only checks integrity.
  std::string address_key;
};

class UcxTransport {
 public:
  static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(const UcxTransportOptions& options,
                                                              ReceiveCallbacks callbacks);
  // Fails every open transfer with CANCELLED (callbacks run), frees everything, stops the thread.
  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // This worker's address, to give to peers (the services exchange it over gRPC).
  const std::string& address() const;
  // Random id peers see as IncomingTransfer::sender.
  uint64_t id() const;

  // Sends `buffer` to the worker at `peer_address`. `done` gets OK once the receiver verified
  // and took the data; otherwise DEADLINE_EXCEEDED, CANCELLED, UNAVAILABLE (peer unreachable or
  // died), or the receiver's refusal (DATA_LOSS, FAILED_PRECONDITION, INVALID_ARGUMENT,
  // RESOURCE_EXHAUSTED). The endpoint to a peer is created on first use and reused.
  // With `trace`, the receiver gets it as IncomingTransfer::trace: only for a receiver that
  // reads it (WorkerInfo.reads_traced_transfers); older ones refuse such a transfer.
  uint64_t Send(const std::string& peer_address, SendBuffer buffer, absl::Duration timeout,
                std::function<void(absl::Status)> done,
                std::optional<TraceContext> trace = std::nullopt);

  // Cancels a send (this side) or a receive (the other side's transfer); the peer is told.
  // Unknown or finished transfers are ignored.
  void CancelSend(uint64_t id);
  void CancelReceive(uint64_t sender, uint64_t id);

  const TransferMetrics& metrics() const;
  // Transfers in flight in either direction (0 when everything was freed).
  size_t open_transfers() const;
  // Peers this transport keeps a connection (or a closing one) to; failed ones are freed.
  size_t peers_held() const;

 private:
  class Impl;
  explicit UcxTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace yoco

#endif  // YOCO_LIB_TRANSPORT_UCX_TRANSPORT_H_
