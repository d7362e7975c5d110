// CRC-32C (Castagnoli), the checksum of state bundles, snapshot files and transfers.
// Uses the SSE4.2 instruction when the CPU has it and a table otherwise; both give the same
// value.
#ifndef YOCO_LIB_CHECKSUM_CRC32C_H_
#define YOCO_LIB_CHECKSUM_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace yoco {

// Extends `crc` (the value returned for the bytes before `data`, 0 to start) over `size`
// bytes. Crc32cExtend(Crc32cExtend(0, a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// The table-driven path alone (for tests of the fast one).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

}  // namespace yoco

#endif  // YOCO_LIB_CHECKSUM_CRC32C_H_
