// libFuzzer entry point for the program reader (tests/fuzz/program_fuzz_target.h).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/program_fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = weft::fuzz::CheckProgramJson(data, size, std::nullopt);
  if (!failure.empty()) {
    std::fprintf(stderr, "%s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
