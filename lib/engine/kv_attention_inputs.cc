// Attention inputs over KvRows.
#include "lib/engine/kv_attention_inputs.h"

namespace yoco {

cpu::DecodeQuery DecodeQueryOver(const float* q, const KvRows& k, const KvRows& v, int64_t n,
                                 float* out) {
  cpu::DecodeQuery query{q, nullptr, nullptr, n, out};
  if (k.dtype() == KvDtype::kF32) {
    query.keys = k.f32();
    query.values = v.f32();
  } else {
    query.keys_bf16 = k.bf16();
    query.values_bf16 = v.bf16();
  }
  query.keys_in_lanes = k.layout() == KvLayout::kKeyLanes;
  query.values_in_strips = v.layout() == KvLayout::kValueStrips;
  return query;
}

F32KvRows F32RowsOf(const KvRows& k, const KvRows& v, int64_t n, std::vector<float>* wide) {
  auto direct = [](const KvRows& rows) {
    return rows.dtype() == KvDtype::kF32 && rows.layout() == KvLayout::kRows;
  };
  const int64_t values = n * k.width();
  if (static_cast<int64_t>(wide->size()) < 2 * values) wide->resize(2 * values);
  F32KvRows out{k.f32(), v.f32()};
  if (!direct(k)) {
    k.CopyToF32(0, n, wide->data());
    out.k = wide->data();
  }
  if (!direct(v)) {
    v.CopyToF32(0, n, wide->data() + values);
    out.v = wide->data() + values;
  }
  return out;
}

}  // namespace yoco
