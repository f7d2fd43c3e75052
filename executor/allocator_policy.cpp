#include "executor/allocator_policy.h"

#include <cstdlib>  // defines __GLIBC__ under glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace weft::exec {

bool ReuseFreedMemory() {
#if defined(__GLIBC__)
  // glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (HEAP_MAX_SIZE / 2); higher values are refused.
  constexpr int kLargestMmapThreshold = 32 << 20;
  constexpr int kKeepFreeHeap = 1 << 30;
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kLargestMmapThreshold) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, kKeepFreeHeap) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

}  // namespace weft::exec
