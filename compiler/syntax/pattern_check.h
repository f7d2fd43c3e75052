#pragma once

// Internal to compiler/syntax: syntax check of module-path globs, shared by both readers.

#include <string>

#include "compiler/diag/emitter.h"
#include "compiler/source/source_buffer.h"

namespace weft::syntax {

// Checks that `text` is a well-formed pattern: "" (the root), or dot-separated segments
// of [A-Za-z0-9_] characters, `*` (any characters within one segment) and brace groups:
// `{a,b.c}` (alternatives, each a non-empty dotted path without braces) or `{m..n}`
// (integers, m <= n). Reports the first problem as InvalidPattern and returns false.
// `first_char_offset` is the byte offset of text[0] in `src` when the source spells the
// pattern character for character (DSL strings, JSON strings without escapes), so the
// caret lands on the offending character; otherwise pass `whole` only (`exact` false).
bool CheckPattern(const std::string& text, const source::SourceBuffer& src,
                  const source::SourceRange& whole, bool exact, uint32_t first_char_offset,
                  diag::Emitter& diags);

}  // namespace weft::syntax
