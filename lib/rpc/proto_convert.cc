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
  s.logprobs =
      p.has_logprobs() ? static_cast<int32_t>(std::min<uint32_t>(p.logprobs(), 1u << 30)) : -1;
  // A map's order is not the wire's: sorted, as Validate wants them.
  s.logit_bias.assign(p.logit_bias().begin(), p.logit_bias().end());
  std::sort(s.logit_bias.begin(), s.logit_bias.end());
  s.repetition_penalty = p.repetition_penalty() == 0.0f ? 1.0f : p.repetition_penalty();
  s.frequency_penalty = p.frequency_penalty();
  s.presence_penalty = p.presence_penalty();
  s.min_tokens = static_cast<int32_t>(std::min<uint32_t>(p.min_tokens(), 1u << 30));
  s.min_p = p.min_p();
  s.json_object = p.response_format().json_object();
  s.json_schema = p.response_format().json_schema();
  s.regex = p.response_format().regex();
  return s;
}

void ToProto(const SamplingParams& s, v1::SamplingParams* p) {
  p->set_temperature(s.temperature);
  p->set_top_k(s.top_k);
  p->set_top_p(s.top_p);
  p->set_seed(s.seed);
  p->mutable_stop_token_ids()->Assign(s.stop_token_ids.begin(), s.stop_token_ids.end());
  if (s.logprobs >= 0) p->set_logprobs(static_cast<uint32_t>(s.logprobs));
  p->mutable_logit_bias()->clear();
  for (const auto& [id, bias] : s.logit_bias) (*p->mutable_logit_bias())[id] = bias;
  p->set_repetition_penalty(s.repetition_penalty == 1.0f ? 0.0f : s.repetition_penalty);
  p->set_frequency_penalty(s.frequency_penalty);
  p->set_presence_penalty(s.presence_penalty);
  p->set_min_tokens(static_cast<uint32_t>(std::max(s.min_tokens, 0)));
  p->set_min_p(s.min_p);
  if (s.json_object) p->mutable_response_format()->set_json_object(true);
  if (!s.json_schema.empty()) p->mutable_response_format()->set_json_schema(s.json_schema);
  if (!s.regex.empty()) p->mutable_response_format()->set_regex(s.regex);
}

void ToProto(const TokenLogprobs& l, v1::TokenLogprob* chosen,
             google::protobuf::RepeatedPtrField<v1::TokenLogprob>* top) {
  chosen->set_id(l.chosen.id);
  chosen->set_logprob(l.chosen.logprob);
  top->Clear();
  for (const TokenLogprob& t : l.top) {
    v1::TokenLogprob* out = top->Add();
    out->set_id(t.id);
    out->set_logprob(t.logprob);
  }
}

v1::CacheEvent ToProto(const CacheEvent& e) {
  v1::CacheEvent out;
  switch (e.kind) {
    case CacheEvent::Kind::kStored:
      out.set_kind(v1::CacheEvent::STORED);
      out.set_tier(e.disk_only ? "disk" : "memory");
      break;
    case CacheEvent::Kind::kEvicted:
      out.set_kind(v1::CacheEvent::EVICTED);
      break;
    case CacheEvent::Kind::kExpired:
      out.set_kind(v1::CacheEvent::EXPIRED);
      break;
  }
  out.set_handle(e.key.Hex());
  out.set_worker(e.worker);
  out.set_unix_ms(absl::ToUnixMillis(e.time));
  return out;
}

SchedulingClass FromProto(const v1::Scheduling& p) {
  SchedulingClass c;
  c.tenant = p.tenant();
  c.priority = std::clamp(p.priority(), -kMaxSchedulingPriority, kBackgroundPriority);
  c.weight = std::clamp<uint32_t>(p.weight(), 1, kMaxSchedulingWeight);
  return c;
}

}  // namespace yoco
