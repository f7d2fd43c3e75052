#include "compiler/syntax/pattern_check.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace weft::syntax {
namespace {

WEFT_DIAGNOSTIC(InvalidPattern, Error, "{0} in pattern `{1}`{2}", std::string, std::string,
                std::string);

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

bool CheckPattern(const std::string& text, const source::SourceBuffer& src,
                  const source::SourceRange& whole, bool exact, uint32_t first_char_offset,
                  diag::Emitter& diags) {
  auto fail = [&](size_t pos, size_t length, std::string what, std::string hint = "") {
    source::SourceRange at = whole;
    if (exact) {
      at = src.RangeAt(whole.file, first_char_offset + static_cast<uint32_t>(pos),
                       static_cast<uint32_t>(std::max<size_t>(length, 1)));
    }
    diags.Emit(at, InvalidPattern, std::move(what), text, std::move(hint));
    return false;
  };
  if (text.empty()) return true;
  bool segment_empty = true;  // nothing yet in the current dotted segment
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (segment_empty) {
        return fail(i, 1, "empty path segment", "; segments are separated by a single `.`");
      }
      segment_empty = true;
    } else if (c == '*') {
      if (i + 1 < text.size() && text[i + 1] == '*') {
        return fail(i, 2, "`**`", "; `*` already matches a whole path segment");
      }
      segment_empty = false;
    } else if (c == '{') {
      size_t close = text.find_first_of("{}", i + 1);
      if (close == std::string::npos || text[close] == '{') {
        if (close != std::string::npos) return fail(close, 1, "nested `{`");
        return fail(i, 1, "unclosed `{`", "; add the matching `}`");
      }
      std::string body = text.substr(i + 1, close - i - 1);
      size_t dots = body.find("..");
      if (dots != std::string::npos) {
        std::string lo = body.substr(0, dots), hi = body.substr(dots + 2);
        if (!AllDigits(lo) || !AllDigits(hi)) {
          return fail(i, close - i + 1, "range `{" + body + "}`",
                      "; a range is written `{m..n}` with integers m <= n");
        }
        if (std::stoll(lo) > std::stoll(hi)) {
          return fail(i, close - i + 1, "empty range `{" + body + "}`",
                      "; a range is written `{m..n}` with integers m <= n");
        }
      } else {
        // Alternatives: non-empty dotted paths of name characters and `*`.
        size_t start = 0;
        while (true) {
          size_t comma = body.find(',', start);
          std::string alt = body.substr(start, comma == std::string::npos ? std::string::npos
                                                                           : comma - start);
          size_t alt_pos = i + 1 + start;
          if (alt.empty()) return fail(alt_pos, 1, "empty alternative");
          bool alt_segment_empty = true;
          for (size_t k = 0; k < alt.size(); ++k) {
            char a = alt[k];
            if (a == '.') {
              if (alt_segment_empty) return fail(alt_pos + k, 1, "empty path segment");
              alt_segment_empty = true;
            } else if (IsNameChar(a) || a == '*') {
              alt_segment_empty = false;
            } else {
              return fail(alt_pos + k, 1, std::string("character `") + a + "`",
                          "; module paths use letters, digits, `_` and `.`");
            }
          }
          if (alt_segment_empty) return fail(alt_pos + alt.size() - 1, 1, "empty path segment");
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      }
      segment_empty = false;
      i = close;
    } else if (c == '}') {
      return fail(i, 1, "unmatched `}`");
    } else if (IsNameChar(c)) {
      segment_empty = false;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      std::string shown = std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : hex;
      return fail(i, 1, "character `" + shown + "`",
                  "; module paths use letters, digits, `_` and `.`");
    }
  }
  if (segment_empty) {
    return fail(text.size() - 1, 1, "empty path segment", "; remove the trailing `.`");
  }
  return true;
}

}  // namespace weft::syntax
