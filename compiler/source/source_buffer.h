#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/source/source_range.h"

namespace weft::source {

// The text of one input file, its name as the user wrote it, and a line table. Immutable
// after construction except for the JSON-pointer annotations a JSON reader may attach (so
// that any later diagnostic at an offset inside a JSON plan can name its JSON pointer) and
// a lookup cache; not for concurrent use.
class SourceBuffer {
 public:
  // A leading UTF-8 byte order mark (EF BB BF) is dropped from `text` and remembered in
  // had_byte_order_mark(): editors hide it, so lines and columns count from the first visible
  // character, and the parsers never see it (in the DSL it would shift every token; JSON has
  // none by RFC 8259). A mark anywhere else stays, and the lexers report it.
  SourceBuffer(std::string filename, std::string text);

  // Reads `path`; std::nullopt (and `*error` set to a one-line reason) when it cannot.
  static std::optional<SourceBuffer> FromFile(const std::string& path, std::string* error);

  const std::string& filename() const { return filename_; }
  // The id a SourceManager gave this buffer (invalid until added to one).
  FileId id() const { return id_; }
  const std::string& text() const { return text_; }
  // True when the file began with a UTF-8 byte order mark (not part of text()).
  bool had_byte_order_mark() const { return had_bom_; }
  uint32_t size() const { return static_cast<uint32_t>(text_.size()); }

  // 1-based line and byte column of `offset` (offset == size() is the end of the text).
  struct LineCol {
    uint32_t line = 0;
    uint32_t col = 0;
  };
  LineCol LineColOf(uint32_t offset) const;

  // The text of 1-based `line`, without its line terminator.
  std::string_view LineText(uint32_t line) const;
  uint32_t line_count() const { return static_cast<uint32_t>(line_starts_.size()); }

  // Builds a range of `length` bytes at `offset` in this buffer (clamped to the text).
  SourceRange RangeAt(FileId file, uint32_t offset, uint32_t length) const;

  // JSON-pointer annotations: the reader of a JSON plan records, for the start offset of
  // every value it visits, that value's RFC 6901 pointer. Empty for DSL files.
  void AnnotateJsonPointer(uint32_t offset, std::string pointer) const;
  // The pointer of the value starting at `offset`, or of the last value starting before it
  // (an offset inside a string); nullopt when nothing was recorded.
  std::optional<std::string> JsonPointerAt(uint32_t offset) const;

 private:
  friend class SourceManager;
  std::string filename_;
  std::string text_;
  bool had_bom_ = false;
  FileId id_;
  std::vector<uint32_t> line_starts_;
  mutable std::map<uint32_t, std::string> json_pointers_;
  mutable uint32_t last_line_ = 1;  // LineColOf's cache (lookups come mostly in order)
};

// Owns the buffers of one compilation and hands out their FileIds. Buffers never move
// once added, so references returned by Get stay valid for the manager's lifetime.
class SourceManager {
 public:
  // Takes ownership of `buffer` and assigns its id.
  FileId Add(SourceBuffer buffer);
  const SourceBuffer& Get(FileId id) const { return *buffers_.at(id.index); }
  const SourceBuffer* Find(FileId id) const {
    return id.valid() && id.index < buffers_.size() ? buffers_[id.index].get() : nullptr;
  }

 private:
  std::vector<std::unique_ptr<SourceBuffer>> buffers_;
};

}  // namespace weft::source
