// Heap retention for the services: freed heap memory stays in the process for the next request
// instead of going back to the kernel.
//
// Why: a request on a long document carries megabytes (a 1M-token prompt is 4 MB as token ids,
// copied into a proto, serialised, parsed, checked), and by default glibc serves blocks of that
// size with fresh mmaps or trims them off the heap when they are freed, so every request pays
// the kernel's page faults again. On the virtual machines this is measured on, a first touch of
// fresh memory runs at 0.2-0.6 GB/s: tens of milliseconds of a long document's time to first
// token went to faulting the same few megabytes in, request after request.
#ifndef YOCO_LIB_RPC_HEAP_RETENTION_H_
#define YOCO_LIB_RPC_HEAP_RETENTION_H_

namespace yoco {

// Blocks below 32 MiB (glibc's largest mmap threshold) come from the heap, and up to 1 GiB of
// free memory at a heap's top is kept rather than trimmed. A process's resident memory then
// stays near its peak use. Call once, first thing in main (before threads start). A no-op
// outside glibc.
void RetainFreedHeapMemory();

}  // namespace yoco

#endif  // YOCO_LIB_RPC_HEAP_RETENTION_H_
