// A downstream program that links the installed weft::compiler.
#include <cstdio>
#include <cstring>

#include "compiler/compile.h"

int main() {
  const char* line = weft::VersionLine();
  std::printf("%s\n", line);
  return std::strncmp(line, "weft ", 5) == 0 ? 0 : 1;
}
