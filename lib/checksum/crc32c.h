// CRC-32C (Castagnoli), the checksum of state bundles, snapshot files and transfers.
// Uses carry-less multiplication (VPCLMULQDQ) or the SSE4.2 instruction when the CPU has them
// and a table otherwise; all give the same value.
#ifndef YOCO_LIB_CHECKSUM_CRC32C_H_
#define YOCO_LIB_CHECKSUM_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace yoco {

// Extends `crc` (the value returned for the bytes before `data`, 0 to start) over `size`
// bytes. Crc32cExtend(Crc32cExtend(0, a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// The ways Crc32cExtend may compute it, for tests of each.
enum class Crc32cPath {
  kPortable,  // a table, a byte at a time
  kSse42,     // the crc32 instruction in three stripes
  kFolding,   // 512-bit carry-less multiplications (VPCLMULQDQ, AVX-512), then kSse42
};
bool Crc32cPathAvailable(Crc32cPath path);
// Crc32cExtend by `path`. REQUIRES: Crc32cPathAvailable(path).
uint32_t Crc32cExtendBy(Crc32cPath path, uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

}  // namespace yoco

#endif  // YOCO_LIB_CHECKSUM_CRC32C_H_
