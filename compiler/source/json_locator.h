#pragma once

// Locating JSON values in their source text by RFC 6901 pointer, for readers that report errors
// as `file:line:col` (nlohmann's DOM keeps no positions). Header-only and dependency-free, so
// the vocabulary layers (compiler/model, compiler/plan) can share it.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace weft::source {

// Escapes one reference token of a JSON pointer ("~" -> "~0", "/" -> "~1").
inline std::string EscapeJsonPointerToken(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

inline std::string JsonPointerChild(const std::string& ptr, std::string_view key) {
  return ptr + "/" + EscapeJsonPointerToken(key);
}
inline std::string JsonPointerChild(const std::string& ptr, size_t index) {
  return ptr + "/" + std::to_string(index);
}

// 1-based line and column (in bytes) of byte `offset` of `text`.
inline void JsonLineCol(std::string_view text, size_t offset, int& line, int& col) {
  line = 1;
  col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
}

// Records the byte offset where each value of a JSON document starts, by pointer. Tolerant:
// on malformed input it records what it could. Meant for error reporting, not for parsing.
class JsonLocator {
 public:
  explicit JsonLocator(std::string_view text) : text_(text) {
    SkipWs();
    Value("");
  }

  std::optional<size_t> Find(const std::string& pointer) const {
    auto it = offsets_.find(pointer);
    if (it == offsets_.end()) return std::nullopt;
    return it->second;
  }

  // Line and column of `pointer`'s value; false when it is not in the text.
  bool LineCol(const std::string& pointer, int& line, int& col) const {
    auto offset = Find(pointer);
    if (!offset) return false;
    JsonLineCol(text_, *offset, line, col);
    return true;
  }

 private:
  void SkipWs() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  std::string String() {
    std::string out;
    ++pos_;  // opening quote
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) {
        out += text_[pos_ + 1];  // keys with escapes are rare; the escaped char is close enough
        pos_ += 2;
      } else {
        out += text_[pos_++];
      }
    }
    ++pos_;  // closing quote
    return out;
  }
  void Value(const std::string& ptr) {
    if (pos_ >= text_.size() || depth_ > 256) return;
    ++depth_;
    offsets_.emplace(ptr, pos_);
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      SkipWs();
      while (pos_ < text_.size() && text_[pos_] != '}') {
        if (text_[pos_] != '"') break;
        const std::string key = String();
        SkipWs();
        if (pos_ < text_.size() && text_[pos_] == ':') ++pos_;
        SkipWs();
        Value(JsonPointerChild(ptr, key));
        SkipWs();
        if (pos_ < text_.size() && text_[pos_] == ',') ++pos_;
        SkipWs();
      }
      ++pos_;
    } else if (c == '[') {
      ++pos_;
      SkipWs();
      size_t i = 0;
      while (pos_ < text_.size() && text_[pos_] != ']') {
        const size_t before = pos_;
        Value(JsonPointerChild(ptr, i++));
        SkipWs();
        if (pos_ < text_.size() && text_[pos_] == ',') ++pos_;
        SkipWs();
        if (pos_ == before) break;
      }
      ++pos_;
    } else if (c == '"') {
      String();
    } else {
      while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '}' && text_[pos_] != ']' &&
             text_[pos_] != ' ' && text_[pos_] != '\n' && text_[pos_] != '\r' && text_[pos_] != '\t')
        ++pos_;
    }
    --depth_;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::unordered_map<std::string, size_t> offsets_;
};

}  // namespace weft::source
