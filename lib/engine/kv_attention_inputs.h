// How the attention kernels read a sequence's K/V rows (KvRows) in either dtype and layout: the
// decode kernel reads bf16 and keys in lanes directly; the blocked (prefill) kernel takes
// row-major fp32, so other rows are widened into a scratch buffer first (its O(queries × keys)
// work dwarfs the copy).
#ifndef YOCO_LIB_ENGINE_KV_ATTENTION_INPUTS_H_
#define YOCO_LIB_ENGINE_KV_ATTENTION_INPUTS_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "lib/engine/kv_rows.h"

namespace yoco {

// A decode query of q over the first n rows of k and v, writing out. REQUIRES: v's layout is
// KvLayout::kRows (keys may be in either).
cpu::DecodeQuery DecodeQueryOver(const float* q, const KvRows& k, const KvRows& v, int64_t n,
                                 float* out);

// fp32 views of the first n rows of k and v: the rows themselves, or copies widened into *wide.
struct F32KvRows {
  const float* k;
  const float* v;
};
F32KvRows F32RowsOf(const KvRows& k, const KvRows& v, int64_t n, std::vector<float>* wide);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_KV_ATTENTION_INPUTS_H_
