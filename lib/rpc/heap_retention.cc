#include "lib/rpc/heap_retention.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace yoco {

void RetainFreedHeapMemory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Each growth of a heap reserves this much more (address space: pages are touched on use).
  mallopt(M_TOP_PAD, 64 << 20);
#endif
}

}  // namespace yoco
