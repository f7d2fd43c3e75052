#include "executor/job_identity.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "compiler/source/sha256.h"

namespace weft::exec {
namespace {

std::string Hex(const std::array<uint8_t, 32>& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

}  // namespace

std::string FileIdentity(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read `" + path + "` to identify the job's files");
  const int64_t size = static_cast<int64_t>(in.tellg());
  constexpr int64_t kSample = int64_t{64} << 10;
  source::Sha256 hash;
  std::string buffer;
  auto read = [&](int64_t offset, int64_t bytes) {
    buffer.resize(static_cast<size_t>(bytes));
    in.seekg(offset);
    in.read(buffer.data(), bytes);
    if (in.gcount() != bytes) throw std::runtime_error("cannot read `" + path + "` to identify the job's files");
    hash.Update(buffer);
  };
  if (size <= 3 * kSample) {
    read(0, size);
  } else {
    read(0, kSample);
    read(size / 2 - kSample / 2, kSample);
    read(size - kSample, kSample);
  }
  return std::to_string(size) + " bytes, sha256:" + Hex(hash.Finish());
}

std::string LaunchId() {
  for (const char* name : {"WEFT_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return v;
  }
  return "";
}

}  // namespace weft::exec
