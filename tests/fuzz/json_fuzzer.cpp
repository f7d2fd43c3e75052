// libFuzzer entry point for the JSON plan reader (built with -DWEFT_LIBFUZZER=ON under clang).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/plan_fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string failure = weft::fuzz::CheckJsonInput(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "property violated: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
