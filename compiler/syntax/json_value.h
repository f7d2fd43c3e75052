#pragma once

// Internal to compiler/syntax: a JSON document tree that remembers where each value and key
// starts in the text (nlohmann::json 3.11 keeps no positions), for the JSON plan reader.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::syntax {

struct JsonMember;

struct JsonValue {
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  uint32_t offset = 0;  // first byte of the value
  uint32_t length = 0;  // bytes of the value's text
  bool boolean = false;
  bool is_integer = false;          // kNumber without fraction or exponent, fits int64
  int64_t integer = 0;              // when is_integer
  std::string text;                 // kString: decoded; kNumber: as written
  bool string_has_escapes = false;  // kString: raw text differs from `text`
  std::vector<JsonValue> elements;  // kArray
  std::vector<JsonMember> members;  // kObject, in document order (duplicates kept)
};

struct JsonMember {
  std::string key;
  uint32_t key_offset = 0;
  uint32_t key_length = 0;
  JsonValue value;
};

// An RFC 8259 syntax error: what was expected and where.
struct JsonError {
  std::string message;
  uint32_t offset = 0;
};

// Parses one JSON document (nesting depth at most 64). On error returns nullopt and sets
// `*error`.
std::optional<JsonValue> ParseJson(const std::string& text, JsonError* error);

// "null", "a boolean", "a number", "a string", "an array", "an object".
const char* JsonTypeName(JsonValue::Type type);

}  // namespace weft::syntax
