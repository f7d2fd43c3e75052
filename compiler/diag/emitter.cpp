#include "compiler/diag/emitter.h"

namespace weft::diag {

WEFT_DIAGNOSTIC(TooManyErrors, Error, "too many errors; stopping after {0}", uint32_t);

void DiagnosticBuilder::AddMessage(const source::SourceRange& range, Kind kind, Level level,
                                   const char* format, std::vector<std::string> args) {
  diagnostic_.messages.push_back(
      Message{kind, level, emitter_->Resolve(range), FormatMessage(format, args)});
}

void DiagnosticBuilder::AddMessageAt(Location loc, Kind kind, Level level, const char* format,
                                     std::vector<std::string> args) {
  diagnostic_.messages.push_back(Message{kind, level, std::move(loc), FormatMessage(format, args)});
}

void DiagnosticBuilder::Emit() {
  if (diagnostic_.messages.empty()) return;
  emitter_->Report(std::move(diagnostic_));
  diagnostic_ = Diagnostic{};
}

Location Emitter::Resolve(const source::SourceRange& range) const {
  Location loc;
  const source::SourceBuffer* buffer = sources_.Find(range.file);
  if (buffer == nullptr) return loc;
  loc.file = buffer->filename();
  if (range.line == 0) return loc;
  loc.line = range.line;
  loc.col = range.col;
  loc.offset = range.offset;
  loc.length = range.length;
  loc.line_text = std::string(buffer->LineText(range.line));
  if (auto pointer = buffer->JsonPointerAt(range.offset)) loc.json_pointer = *pointer;
  return loc;
}

void Emitter::Report(Diagnostic diagnostic) {
  if (limit_reached_) return;
  if (diagnostic.level == Level::kError) {
    if (max_errors_ != 0 && error_count_ >= max_errors_) {
      limit_reached_ = true;
      Diagnostic stop;
      stop.level = Level::kError;
      // No line: it belongs to the whole run, and sorts after every located diagnostic.
      Location where;
      where.file = diagnostic.messages.front().loc.file;
      stop.messages.push_back(Message{Kind::kTooManyErrors, Level::kError, where,
                                      FormatMessage(TooManyErrors.format,
                                                    {std::to_string(max_errors_)})});
      consumer_.Handle(std::move(stop));
      return;
    }
    ++error_count_;
  }
  consumer_.Handle(std::move(diagnostic));
}

}  // namespace weft::diag
