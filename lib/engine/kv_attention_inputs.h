// How the attention kernels read a sequence's K/V rows (KvRows) in either dtype and layout: the
// decode kernel reads the chunks where they are (bf16, keys in lanes, chunks shared with other
// sequences); the blocked (prefill) kernel takes row-major fp32, so the rows are copied and
// widened into a scratch buffer first (its O(queries × keys) work dwarfs the copy).
#ifndef YOCO_LIB_ENGINE_KV_ATTENTION_INPUTS_H_
#define YOCO_LIB_ENGINE_KV_ATTENTION_INPUTS_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "lib/engine/kv_rows.h"

namespace yoco {

// A decode query of q over the first n rows of k and v (same dtype), writing out.
cpu::DecodeQuery DecodeQueryOver(const float* q, const KvRows& k, const KvRows& v, int64_t n,
                                 float* out);

// fp32 row-major copies of the first n rows of k and v, in *wide.
struct F32KvRows {
  const float* k;
  const float* v;
};
F32KvRows F32RowsOf(const KvRows& k, const KvRows& v, int64_t n, std::vector<float>* wide);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_KV_ATTENTION_INPUTS_H_
