#include "compiler/source/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace weft::source {

void WriteFileOrThrow(const std::string& path, std::string_view text) {
  const auto fail = [&](int error) {
    throw std::runtime_error("cannot write `" + path + "`: " + std::strerror(error));
  };
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fail(errno);
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
    const int error = errno;
    std::fclose(f);
    fail(error);
  }
  if (std::fflush(f) != 0) {
    const int error = errno;
    std::fclose(f);
    fail(error);
  }
  if (std::fclose(f) != 0) fail(errno);
}

std::string StdoutFailure() {
  errno = 0;
  std::cout.flush();
  const bool stream_failed = std::cout.fail();
  const bool file_failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!stream_failed && !file_failed) return "";
  return errno != 0 ? std::strerror(errno) : "a write failed (is the disk full, or the pipe closed?)";
}

}  // namespace weft::source
