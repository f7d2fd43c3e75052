// ReuseFreedMemory: after it, a freed activation-sized block is reused without page faults.
#include "executor/allocator_policy.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

namespace weft::exec {
namespace {

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Minor page faults taken while allocating, touching and freeing `bytes`.
long FaultsOfOneBlock(size_t bytes) {
  const long before = MinorFaults();
  void* block = std::malloc(bytes);
  std::memset(block, 1, bytes);
  std::free(block);
  return MinorFaults() - before;
}

TEST(AllocatorPolicy, FreedBlocksAreReusedWithoutPageFaults) {
#if defined(__GLIBC__)
  ASSERT_TRUE(ReuseFreedMemory());
  constexpr size_t kBytes = 8 << 20;  // 2,048 pages: over glibc's default mmap threshold
  FaultsOfOneBlock(kBytes);           // the first time the heap grows and its pages fault
  const long again = FaultsOfOneBlock(kBytes);
  EXPECT_LT(again, 64) << "a freed 8 MiB block should come back from the heap, not fresh pages";
#else
  GTEST_SKIP() << "glibc only";
#endif
}

}  // namespace
}  // namespace weft::exec
