#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::diag {

// Every diagnostic kind, from kinds.def.
enum class Kind : uint16_t {
#define WEFT_DIAGNOSTIC_KIND(Name) k##Name,
#include "compiler/diag/kinds.def"
#undef WEFT_DIAGNOSTIC_KIND
};

// The kind's registry name, e.g. "UnknownStyle" (what `[UnknownStyle]` prints).
std::string_view KindName(Kind kind);
// All kinds in registry order (for coverage tests and SARIF rule tables).
const std::vector<Kind>& AllKinds();

enum class Level : uint8_t { kNote, kWarning, kError };
// "note", "warning", "error".
std::string_view LevelName(Level level);

// Where a message points, resolved to text so renderers need no source buffer.
// line/col are 1-based (columns count bytes); 0 means unknown. `line_text` is the whole
// source line; `json_pointer` is set when the location is inside a JSON plan.
struct Location {
  std::string file;
  uint32_t line = 0;
  uint32_t col = 0;
  uint32_t length = 1;
  uint32_t offset = 0;
  std::string line_text;
  std::string json_pointer;
};

// One line of a diagnostic: the error/warning itself or a note.
struct Message {
  Kind kind;
  Level level;
  Location loc;
  std::string text;
};

// A reported problem: messages[0] is the error or warning, the rest are its notes (each
// with its own location, possibly in another file or none).
struct Diagnostic {
  Level level = Level::kError;
  std::vector<Message> messages;
};

// Receives finished diagnostics. Flush is called once when the producer is done (sorting
// and document-style renderers write there).
class Consumer {
 public:
  virtual ~Consumer() = default;
  virtual void Handle(Diagnostic diagnostic) = 0;
  virtual void Flush() {}
};

// Substitutes positional arguments `{0}`, `{1}`, ... in `format`; `{{` and `}}` are literal
// braces. An index with no argument is kept verbatim (an internal bug, visible in tests).
std::string FormatMessage(std::string_view format, const std::vector<std::string>& args);

}  // namespace weft::diag
