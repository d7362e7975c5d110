#include "lib/workers/part_sender.h"

#include <algorithm>
#include <memory>

#include "lib/engine/bundle_part.h"

namespace yoco {

void PartSender::SendReady(const SequenceState& state, int64_t end) {
  while (first_error_.ok() && next_row_ + options_.rows_per_part <= end) {
    Send(state, options_.rows_per_part);
  }
}

void PartSender::SendRest(const SequenceState& state, int64_t end) {
  SendReady(state, end);
  if (first_error_.ok() && next_row_ < end) Send(state, end - next_row_);
}

void PartSender::Send(const SequenceState& state, int64_t rows) {
  if (in_flight_.size() >= kInFlight) {
    first_error_ = in_flight_.front().get();
    in_flight_.pop_front();
    if (!first_error_.ok()) return;
  }
  std::shared_ptr<WarmBuffer> buffer = buffers_.Take(BundlePartBytes(config_, rows));
  SerializeBundlePartTo(config_, options_.fingerprint, options_.parts_id, next_index_, state,
                        next_row_, rows, buffer->data());
  bytes_ += buffer->size();
  auto done = std::make_shared<std::promise<absl::Status>>();
  in_flight_.push_back(done->get_future());
  transport_.Send(options_.decode_address, {buffer->data(), buffer->size(), buffer},
                  options_.timeout, [done](absl::Status st) { done->set_value(st); });
  next_row_ += rows;
  ++next_index_;
}

absl::Status PartSender::Finish() {
  for (std::future<absl::Status>& f : in_flight_) {
    absl::Status st = f.get();
    if (first_error_.ok()) first_error_ = st;
  }
  in_flight_.clear();
  return first_error_;
}

}  // namespace yoco
