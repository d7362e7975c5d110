// Attention inputs over KvRows.
#include "lib/engine/kv_attention_inputs.h"

namespace yoco {

cpu::DecodeQuery DecodeQueryOver(const float* q, const KvRows& k, const KvRows& v, int64_t n,
                                 float* out) {
  cpu::DecodeQuery query{q, nullptr, nullptr, n, out};
  query.key_blocks = k.chunk_table();
  query.value_blocks = v.chunk_table();
  query.block_rows = KvRows::kChunkRows;
  query.blocks_bf16 = k.dtype() == KvDtype::kBF16;
  query.keys_in_lanes = k.layout() == KvLayout::kKeyLanes;
  query.values_in_strips = v.layout() == KvLayout::kValueStrips;
  return query;
}

F32KvRows F32RowsOf(const KvRows& k, const KvRows& v, int64_t n, std::vector<float>* wide) {
  const int64_t values = n * k.width();
  if (static_cast<int64_t>(wide->size()) < 2 * values) wide->resize(2 * values);
  k.CopyToF32(0, n, wide->data());
  v.CopyToF32(0, n, wide->data() + values);
  return {wide->data(), wide->data() + values};
}

}  // namespace yoco
