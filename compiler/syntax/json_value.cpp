#include "compiler/syntax/json_value.h"

#include <charconv>
#include <cstring>

#include "compiler/syntax/utf8.h"

namespace weft::syntax {
namespace {

constexpr int kMaxDepth = 64;

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : text_(text) {}

  std::optional<JsonValue> Document(JsonError* error) {
    SkipSpace();
    JsonValue value;
    if (!Value(value, 0)) {
      *error = error_;
      return std::nullopt;
    }
    SkipSpace();
    if (pos_ != text_.size()) {
      *error = JsonError{"unexpected text after the JSON document", Pos()};
      return std::nullopt;
    }
    return value;
  }

 private:
  uint32_t Pos() const { return static_cast<uint32_t>(pos_); }
  bool Fail(std::string message) {
    error_ = JsonError{std::move(message), Pos()};
    return false;
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(const char* word) {
    size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0) return Fail("unexpected character; expected a JSON value");
    pos_ += n;
    return true;
  }

  bool Value(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return Fail("JSON nested deeper than 64 levels");
    out.offset = Pos();
    if (pos_ >= text_.size()) return Fail("unexpected end of file; expected a JSON value");
    char c = text_[pos_];
    bool ok = false;
    if (c == '{') {
      out.type = JsonValue::Type::kObject;
      ok = Object(out, depth);
    } else if (c == '[') {
      out.type = JsonValue::Type::kArray;
      ok = Array(out, depth);
    } else if (c == '"') {
      out.type = JsonValue::Type::kString;
      ok = String(out.text, &out.string_has_escapes);
    } else if (c == 't') {
      out.type = JsonValue::Type::kBool;
      out.boolean = true;
      ok = Literal("true");
    } else if (c == 'f') {
      out.type = JsonValue::Type::kBool;
      ok = Literal("false");
    } else if (c == 'n') {
      ok = Literal("null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      out.type = JsonValue::Type::kNumber;
      ok = Number(out);
    } else {
      return Fail(c == '\'' ? "single quote; JSON strings use double quotes"
                            : "unexpected character; expected a JSON value");
    }
    out.length = Pos() - out.offset;
    return ok;
  }

  bool Object(JsonValue& out, int depth) {
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return Fail(pos_ < text_.size() && text_[pos_] == '}'
                        ? "trailing comma before `}`"
                        : "expected a string key in double quotes");
      }
      JsonMember member;
      member.key_offset = Pos();
      bool escapes = false;
      if (!String(member.key, &escapes)) return false;
      member.key_length = Pos() - member.key_offset;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') {
        return Fail(pos_ < text_.size() && text_[pos_] == '='
                        ? "unexpected `=`; JSON separates a key from its value with `:`"
                        : "expected `:` after the object key");
      }
      ++pos_;
      SkipSpace();
      if (!Value(member.value, depth + 1)) return false;
      out.members.push_back(std::move(member));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected `,` or `}` after the object member");
    }
  }

  bool Array(JsonValue& out, int depth) {
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ']') return Fail("trailing comma before `]`");
      JsonValue element;
      if (!Value(element, depth + 1)) return false;
      out.elements.push_back(std::move(element));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected `,` or `]` after the array element");
    }
  }

  static void AppendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool Hex4(uint32_t& out) {
    if (pos_ + 4 > text_.size()) return Fail("incomplete `\\u` escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_++];
      out <<= 4;
      if (h >= '0' && h <= '9') out |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') out |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') out |= static_cast<uint32_t>(h - 'A' + 10);
      else return Fail("invalid hex digit in `\\u` escape");
    }
    return true;
  }

  bool String(std::string& out, bool* has_escapes) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Fail("string has no closing quote");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c == '\n' || c == '\r') return Fail("string has no closing quote before the end of the line");
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string; escape it");
      if (c != '\\') {
        size_t length = Utf8SequenceLength(text_, pos_);
        if (length == 0) return Fail("byte that is not UTF-8 in string; JSON text is UTF-8");
        out.append(text_, pos_, length);
        pos_ += length;
        continue;
      }
      *has_escapes = true;
      if (++pos_ >= text_.size()) return Fail("string has no closing quote");
      char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (text_.compare(pos_, 2, "\\u") != 0) return Fail("unpaired surrogate in `\\u` escape");
            pos_ += 2;
            if (!Hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return Fail("unpaired surrogate in `\\u` escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail("unpaired surrogate in `\\u` escape");
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          --pos_;
          return Fail("unknown escape in string");
      }
    }
  }

  bool Number(JsonValue& out) {
    size_t start = pos_;
    bool integer = true;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      return Fail("expected a digit");
    }
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() &&
        std::isdigit(static_cast<unsigned char>(text_[pos_ + 1]))) {
      return Fail("leading zero in number");
    }
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integer = false;
      ++pos_;
      if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        return Fail("expected a digit after `.`");
      }
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integer = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        return Fail("expected a digit in the exponent");
      }
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    out.text = text_.substr(start, pos_ - start);
    if (integer) {
      auto [ptr, ec] = std::from_chars(out.text.data(), out.text.data() + out.text.size(), out.integer);
      out.is_integer = ec == std::errc() && ptr == out.text.data() + out.text.size();
    }
    return true;
  }

  const std::string& text_;
  size_t pos_ = 0;
  JsonError error_;
};

}  // namespace

std::optional<JsonValue> ParseJson(const std::string& text, JsonError* error) {
  return JsonParser(text).Document(error);
}

const char* JsonTypeName(JsonValue::Type type) {
  switch (type) {
    case JsonValue::Type::kNull: return "null";
    case JsonValue::Type::kBool: return "a boolean";
    case JsonValue::Type::kNumber: return "a number";
    case JsonValue::Type::kString: return "a string";
    case JsonValue::Type::kArray: return "an array";
    case JsonValue::Type::kObject: return "an object";
  }
  return "a value";
}

}  // namespace weft::syntax
