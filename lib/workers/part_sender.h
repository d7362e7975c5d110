// PartSender: sends a sequence's K/V rows as bundle parts (BundlePart) to one decode worker, a
// few transfers in flight while the next part is serialised. Parts can go while the prefill that
// produces the rows is still running (SendReady at each chunk boundary), so a long prompt's
// transfer hides behind its prefill; the bundle that follows names what was sent.
#ifndef YOCO_LIB_WORKERS_PART_SENDER_H_
#define YOCO_LIB_WORKERS_PART_SENDER_H_

#include <cstdint>
#include <deque>
#include <future>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/engine/sequence_state.h"
#include "lib/engine/warm_buffer_pool.h"
#include "lib/model/model_config.h"
#include "lib/transport/ucx_transport.h"

namespace yoco {

struct PartSenderOptions {
  std::string decode_address;
  absl::Duration timeout;
  uint64_t parts_id = 0;
  uint64_t fingerprint = 0;
  int64_t first_row = 0;      // the first row to send (a chunk boundary)
  int64_t rows_per_part = 0;  // whole chunks
};

class PartSender {
 public:
  // The transport and the pool must outlive the sender.
  PartSender(const ModelConfig& config, UcxTransport& transport, WarmBufferPool& buffers,
             PartSenderOptions options)
      : config_(config),
        transport_(transport),
        buffers_(buffers),
        options_(std::move(options)),
        next_row_(options_.first_row) {}
  // Waits for the transfers still in flight.
  ~PartSender() { Finish().IgnoreError(); }
  PartSender(const PartSender&) = delete;
  PartSender& operator=(const PartSender&) = delete;

  // Sends every whole part of `state`'s rows below `end` (a chunk boundary) not yet sent.
  void SendReady(const SequenceState& state, int64_t end);
  // Sends the rows left below `end`, the last part possibly shorter.
  void SendRest(const SequenceState& state, int64_t end);
  // Waits for every transfer; OK when the decode worker took every part sent.
  absl::Status Finish();

  int32_t parts() const { return next_index_; }
  int64_t part_rows() const { return next_row_ - options_.first_row; }
  uint64_t parts_id() const { return options_.parts_id; }
  uint64_t bytes() const { return bytes_; }

 private:
  // Enough in flight that the wire never waits for the next part to be serialised.
  static constexpr size_t kInFlight = 3;

  void Send(const SequenceState& state, int64_t rows);

  const ModelConfig& config_;
  UcxTransport& transport_;
  WarmBufferPool& buffers_;
  const PartSenderOptions options_;
  int64_t next_row_;
  int32_t next_index_ = 0;
  uint64_t bytes_ = 0;
  std::deque<std::future<absl::Status>> in_flight_;
  absl::Status first_error_;  // once set, nothing more is sent
};

}  // namespace yoco

#endif  // YOCO_LIB_WORKERS_PART_SENDER_H_
