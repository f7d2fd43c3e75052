#pragma once

// What this machine can still give, for refusing jobs that cannot fit before they start.

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace weft::exec {

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
inline int64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// Bytes as "12.3 GB", for messages.
inline std::string Gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}

}  // namespace weft::exec
