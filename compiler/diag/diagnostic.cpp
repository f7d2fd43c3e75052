#include "compiler/diag/diagnostic.h"

namespace weft::diag {

std::string_view KindName(Kind kind) {
  switch (kind) {
#define WEFT_DIAGNOSTIC_KIND(Name) \
  case Kind::k##Name:              \
    return #Name;
#include "compiler/diag/kinds.def"
#undef WEFT_DIAGNOSTIC_KIND
  }
  return "Unknown";
}

const std::vector<Kind>& AllKinds() {
  static const std::vector<Kind> kinds = {
#define WEFT_DIAGNOSTIC_KIND(Name) Kind::k##Name,
#include "compiler/diag/kinds.def"
#undef WEFT_DIAGNOSTIC_KIND
  };
  return kinds;
}

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kNote:
      return "note";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "error";
}

std::string FormatMessage(std::string_view format, const std::vector<std::string>& args) {
  std::string out;
  out.reserve(format.size() + 16);
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '{' && i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < format.size() && format[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t close = format.find('}', i);
      size_t index = 0;
      bool numeric = close != std::string_view::npos && close > i + 1;
      for (size_t j = i + 1; numeric && j < close; ++j) {
        if (format[j] < '0' || format[j] > '9') numeric = false;
        else index = index * 10 + static_cast<size_t>(format[j] - '0');
      }
      if (numeric && index < args.size()) {
        out += args[index];
        i = close;
      } else {
        out += c;
      }
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace weft::diag
