#pragma once

// Internal to compiler/syntax: UTF-8 validation shared by both readers.

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::syntax {

// The length (1-4) of the well-formed UTF-8 sequence starting at text[i], or 0 when the
// bytes there are not UTF-8 (truncated, overlong, surrogate, or past U+10FFFF).
inline size_t Utf8SequenceLength(const std::string& text, size_t i) {
  unsigned char c = static_cast<unsigned char>(text[i]);
  size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  if (length == 1) return 1;
  uint32_t cp = c & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < length; ++k) {
    unsigned char next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (next & 0x3F);
  }
  const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[length] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return length;
}

}  // namespace weft::syntax
