#include "compiler/source/source_buffer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace weft::source {

SourceBuffer::SourceBuffer(std::string filename, std::string text)
    : filename_(std::move(filename)), text_(std::move(text)) {
  if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) {
    text_.erase(0, 3);
    had_bom_ = true;
  }
  line_starts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
}

std::optional<SourceBuffer> SourceBuffer::FromFile(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = "cannot open `" + path + "`: " + std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    if (error) *error = "cannot read `" + path + "`";
    return std::nullopt;
  }
  return SourceBuffer(path, text.str());
}

SourceBuffer::LineCol SourceBuffer::LineColOf(uint32_t offset) const {
  offset = std::min<uint32_t>(offset, size());
  // Readers ask in increasing order: try the line of the previous answer and the next one
  // before searching.
  auto on_line = [&](uint32_t line) {  // 1-based
    return line >= 1 && line <= line_starts_.size() && line_starts_[line - 1] <= offset &&
           (line == line_starts_.size() || offset < line_starts_[line]);
  };
  uint32_t line = last_line_;
  if (!on_line(line)) {
    if (on_line(line + 1)) {
      ++line;
    } else {
      auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
      line = static_cast<uint32_t>(it - line_starts_.begin());
    }
  }
  last_line_ = line;
  return {line, offset - line_starts_[line - 1] + 1};
}

std::string_view SourceBuffer::LineText(uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  uint32_t begin = line_starts_[line - 1];
  uint32_t end = line < line_starts_.size() ? line_starts_[line] : size();
  std::string_view text(text_.data() + begin, end - begin);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

SourceRange SourceBuffer::RangeAt(FileId file, uint32_t offset, uint32_t length) const {
  offset = std::min<uint32_t>(offset, size());
  length = std::min<uint32_t>(length, size() - offset);
  LineCol lc = LineColOf(offset);
  return SourceRange{file, offset, length, lc.line, lc.col};
}

void SourceBuffer::AnnotateJsonPointer(uint32_t offset, std::string pointer) const {
  json_pointers_.emplace(offset, std::move(pointer));
}

std::optional<std::string> SourceBuffer::JsonPointerAt(uint32_t offset) const {
  // The value that starts at or most recently before `offset`: a position inside a string
  // (a pattern's bad character) belongs to that string.
  auto it = json_pointers_.upper_bound(offset);
  if (it == json_pointers_.begin()) return std::nullopt;
  return std::prev(it)->second;
}

FileId SourceManager::Add(SourceBuffer buffer) {
  FileId id{static_cast<uint32_t>(buffers_.size())};
  buffer.id_ = id;
  buffers_.push_back(std::make_unique<SourceBuffer>(std::move(buffer)));
  return id;
}

}  // namespace weft::source
