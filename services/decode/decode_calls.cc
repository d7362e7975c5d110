// The named Decode calls.
#include "services/decode/decode_calls.h"

#include "services/decode/decode_stream.h"

namespace yoco {

bool DecodeCalls::Add(uint64_t call_id, DecodeStream* call) {
  if (call_id == 0) return false;
  absl::MutexLock lock(&mu_);
  return calls_.emplace(call_id, call).second;
}

void DecodeCalls::Remove(uint64_t call_id, DecodeStream* call) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(call_id);
  if (it != calls_.end() && it->second == call) calls_.erase(it);
}

bool DecodeCalls::EndChoice(uint64_t call_id, uint32_t choice) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(call_id);
  return it != calls_.end() && it->second->EndChoice(choice);
}

}  // namespace yoco
