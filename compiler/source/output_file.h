#pragma once

// Writing what weft and weft-run produce (plans, graphs, reports, traces) so that a failed write
// is an error, never an empty or truncated file with exit status 0: a full disk or a closed pipe
// often shows only when the buffer is flushed or the file closed, so both are checked.

#include <string>
#include <string_view>

namespace weft::source {

// Writes `text` to `path` (replacing it). Throws std::runtime_error "cannot write `PATH`: REASON"
// when opening, writing, flushing or closing fails.
void WriteFileOrThrow(const std::string& path, std::string_view text);

// Flushes std::cout and stdout. Returns "" when everything written to them so far arrived, else
// the reason ("No space left on device").
std::string StdoutFailure();

}  // namespace weft::source
