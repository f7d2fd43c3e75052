#pragma once

#include <cstdint>
#include <limits>

namespace weft::source {

// Identifies one SourceBuffer inside a SourceManager. A default-constructed id is "no
// file": ranges carrying it render without a location.
struct FileId {
  static constexpr uint32_t kInvalid = std::numeric_limits<uint32_t>::max();
  uint32_t index = kInvalid;

  bool valid() const { return index != kInvalid; }
  friend bool operator==(FileId a, FileId b) { return a.index == b.index; }
  friend bool operator!=(FileId a, FileId b) { return a.index != b.index; }
};

// A span of bytes in one source file. `line` and `col` are 1-based and describe `offset`
// (columns count bytes); they are stored, not recomputed, so that a range can be copied
// into later phases and still render without the buffer. `length` is in bytes and may be
// 0 for a point (e.g. "expected `}` at end of file").
struct SourceRange {
  FileId file;
  uint32_t offset = 0;
  uint32_t length = 0;
  uint32_t line = 0;
  uint32_t col = 0;

  bool valid() const { return file.valid() && line > 0; }
  uint32_t end() const { return offset + length; }
};

// The smallest range covering both `a` and `b` (which must be in the same file; `a` first).
inline SourceRange Cover(const SourceRange& a, const SourceRange& b) {
  if (!a.valid()) return b;
  if (!b.valid()) return a;
  SourceRange r = a;
  uint32_t end = b.end() > a.end() ? b.end() : a.end();
  r.length = end - a.offset;
  return r;
}

}  // namespace weft::source
