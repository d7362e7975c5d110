// K/V rows copied to or from a serialised form (state bundles, bundle parts) with the CRC-32C
// of the serialised bytes computed a slice at a time right behind the copy: the slice is still
// in cache, so a gigabyte of rows is read from memory once, not once for the copy and once for
// the checksum.
#ifndef YOCO_LIB_ENGINE_CHECKSUMMED_ROWS_H_
#define YOCO_LIB_ENGINE_CHECKSUMMED_ROWS_H_

#include <cstdint>

#include "lib/engine/kv_rows.h"

namespace yoco {

// Writes rows [row0, row0 + n) of `rows` to `out` as KvRows::CopyRowBytes does and extends
// `*crc` over the bytes written.
void CopyRowsOut(const KvRows& rows, int64_t row0, int64_t n, uint8_t* out, uint32_t* crc);

// Appends n rows given as KvRows::CopyRowBytes writes them and extends `*crc` over the bytes
// read.
void AppendRowsIn(const uint8_t* in, int64_t n, KvRows* rows, uint32_t* crc);

// Writes chunks [chunk0, chunk0 + n) of `rows` as stored (KvRows::chunk_data) to `out` and
// extends `*crc` over them: a plain copy, where rows out of a layout are a scatter per value.
void CopyChunksOut(const KvRows& rows, int64_t chunk0, int64_t n, uint8_t* out, uint32_t* crc);

// Appends n whole chunks given as CopyChunksOut writes them and extends `*crc` over the bytes
// read. REQUIRES: rows->rows() a multiple of KvRows::kChunkRows.
void AppendChunksIn(const uint8_t* in, int64_t n, KvRows* rows, uint32_t* crc);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_CHECKSUMMED_ROWS_H_
