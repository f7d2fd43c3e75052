#include "compiler/source/version.h"

#include <string>

namespace weft {

const char* VersionLine() {
#ifdef NDEBUG
  static const std::string line = std::string("weft ") + kVersion + " (optimized build)";
#else
  static const std::string line = std::string("weft ") + kVersion + " (debug build)";
#endif
  return line.c_str();
}

}  // namespace weft
