// Message conversions.
#include "lib/rpc/proto_convert.h"

#include <algorithm>

namespace yoco {

SamplingParams FromProto(const v1::SamplingParams& p) {
  SamplingParams s;
  s.temperature = p.temperature();
  s.top_k = p.top_k();
  s.top_p = p.top_p() == 0.0f ? 1.0f : p.top_p();
  s.seed = p.seed();
  s.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  return s;
}

void ToProto(const SamplingParams& s, v1::SamplingParams* p) {
  p->set_temperature(s.temperature);
  p->set_top_k(s.top_k);
  p->set_top_p(s.top_p);
  p->set_seed(s.seed);
  p->mutable_stop_token_ids()->Assign(s.stop_token_ids.begin(), s.stop_token_ids.end());
}

SchedulingClass FromProto(const v1::Scheduling& p) {
  SchedulingClass c;
  c.tenant = p.tenant();
  c.priority = std::clamp(p.priority(), -kMaxSchedulingPriority, kMaxSchedulingPriority);
  c.weight = std::clamp<uint32_t>(p.weight(), 1, kMaxSchedulingWeight);
  return c;
}

}  // namespace yoco
