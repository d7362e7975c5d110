// DecodeCalls: the Decode calls on a decode worker that EndChoice can name, by the id their
// caller gave them (DecodeRequest.call_id). A call is named from its start until its reactor
// goes, and EndChoice reaches it under this object's lock, so it cannot go meanwhile.
#ifndef YOCO_SERVICES_DECODE_DECODE_CALLS_H_
#define YOCO_SERVICES_DECODE_DECODE_CALLS_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace yoco {

class DecodeStream;

class DecodeCalls {
 public:
  // False when the id is 0 or already taken: the call cannot be named then.
  bool Add(uint64_t call_id, DecodeStream* call);
  void Remove(uint64_t call_id, DecodeStream* call);
  // Ends `choice` of the named call (DecodeStream::EndChoice); false when there is no such call,
  // or it has no such choice going.
  bool EndChoice(uint64_t call_id, uint32_t choice);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, DecodeStream*> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace yoco

#endif  // YOCO_SERVICES_DECODE_DECODE_CALLS_H_
