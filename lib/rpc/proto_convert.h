// Conversions between the API's messages and engine types.
#ifndef YOCO_LIB_RPC_PROTO_CONVERT_H_
#define YOCO_LIB_RPC_PROTO_CONVERT_H_

#include "lib/cache/cache_event.h"
#include "lib/model/sampling_params.h"
#include "lib/model/token_logprobs.h"
#include "lib/scheduling/scheduling_class.h"
#include "yoco/v1/worker.pb.h"
#include "yoco/v1/yoco.pb.h"

namespace yoco {

// top_p and repetition_penalty 0 mean "off" on the wire (proto3's default), 1 in the engine;
// logprobs unset is -1 (a value beyond int32 reads as an int32 beyond kMaxTopLogprobs: Validate
// refuses both).
SamplingParams FromProto(const v1::SamplingParams& p);
// Values outside the tenant file's ranges are brought into them (the caller is the router, but a
// worker never trusts a number to be sane).
SchedulingClass FromProto(const v1::Scheduling& p);
void ToProto(const SamplingParams& s, v1::SamplingParams* p);
v1::CacheEvent ToProto(const CacheEvent& e);
// Into a GeneratedToken's logprob and top_logprobs (or a PrefillResponse's first-token pair).
void ToProto(const TokenLogprobs& l, v1::TokenLogprob* chosen,
             google::protobuf::RepeatedPtrField<v1::TokenLogprob>* top);

}  // namespace yoco

#endif  // YOCO_LIB_RPC_PROTO_CONVERT_H_
