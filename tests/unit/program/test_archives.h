#pragma once

// Writing small zip archives for the reader's tests: a fixture program with entries replaced,
// removed or cut short.

#include <zip.h>

#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/program/archive.h"

namespace weft::program::testing {

inline std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

// Writes `entries` (full names inside the zip) to `path`.
inline void WriteZip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& entries) {
  int error = 0;
  zip_t* zip = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (zip == nullptr) throw std::runtime_error("cannot create " + path);
  std::vector<std::string> keep;  // libzip reads the buffers at close
  keep.reserve(entries.size());
  for (const auto& [name, data] : entries) {
    keep.push_back(data);
    zip_source_t* src = zip_source_buffer(zip, keep.back().data(), keep.back().size(), 0);
    if (zip_file_add(zip, name.c_str(), src, ZIP_FL_OVERWRITE) < 0) throw std::runtime_error("cannot add " + name);
  }
  if (zip_close(zip) != 0) throw std::runtime_error("cannot write " + path);
}

// A copy of the archive at `from` written to `to`, with each entry (relative to the root) mapped
// by `edit`: nullopt drops it.
template <typename Edit>
void CopyArchive(const std::string& from, const std::string& to, Edit edit) {
  Archive a = Archive::Open(from);
  std::vector<std::pair<std::string, std::string>> entries;
  for (const std::string& e : a.entries()) {
    std::optional<std::string> data = edit(e, a.Read(e));
    if (data) entries.emplace_back(a.root() + e, *data);
  }
  WriteZip(to, entries);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

}  // namespace weft::program::testing
