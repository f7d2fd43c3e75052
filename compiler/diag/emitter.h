#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "compiler/diag/diagnostic.h"
#include "compiler/source/source_buffer.h"
#include "compiler/source/source_range.h"

namespace weft::diag {

// The static description of one diagnostic: its kind, level and message format with
// positional `{0}` arguments of the listed types. Declare it next to the code that emits
// it with WEFT_DIAGNOSTIC. Argument types are std::string or integers, never views or
// `const char*` (a diagnostic may outlive the text it was built from).
template <typename... Args>
struct DiagnosticDef {
  static_assert((... && (std::is_same_v<Args, std::string> || std::is_integral_v<Args>)),
                "diagnostic arguments are std::string or integers");
  Kind kind;
  Level level;
  const char* format;
};

// WEFT_DIAGNOSTIC(UnknownStyle, Error, "unknown style `{0}`", std::string);
// A diagnostic without arguments ends with an empty argument list: `..., "message", );`.
#define WEFT_DIAGNOSTIC(Name, LevelName, Format, ...)                          \
  static constexpr ::weft::diag::DiagnosticDef<__VA_ARGS__> Name {             \
    ::weft::diag::Kind::k##Name, ::weft::diag::Level::k##LevelName, Format     \
  }

class Emitter;

namespace internal {
template <typename T>
struct Identity {
  using type = T;
};
inline std::string ToArg(std::string s) { return s; }
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
std::string ToArg(T v) {
  return std::to_string(v);
}
}  // namespace internal

// A diagnostic under construction: add notes, then Emit(). Emit is explicit (no emission
// in a destructor) so that a builder can be dropped on purpose.
class DiagnosticBuilder {
 public:
  template <typename... Args>
  DiagnosticBuilder& Note(const source::SourceRange& range, const DiagnosticDef<Args...>& def,
                          typename internal::Identity<Args>::type... args) {
    AddMessage(range, def.kind, def.level, def.format, {internal::ToArg(std::move(args))...});
    return *this;
  }
  // A note at an already resolved location (see Emitter::BuildAt).
  template <typename... Args>
  DiagnosticBuilder& NoteAt(Location loc, const DiagnosticDef<Args...>& def,
                            typename internal::Identity<Args>::type... args) {
    AddMessageAt(std::move(loc), def.kind, def.level, def.format, {internal::ToArg(std::move(args))...});
    return *this;
  }
  // Hands the diagnostic to the emitter's consumer (subject to --max-errors).
  void Emit();

 private:
  friend class Emitter;
  explicit DiagnosticBuilder(Emitter* emitter) : emitter_(emitter) {}
  void AddMessage(const source::SourceRange& range, Kind kind, Level level, const char* format,
                  std::vector<std::string> args);
  void AddMessageAt(Location loc, Kind kind, Level level, const char* format, std::vector<std::string> args);

  Emitter* emitter_;
  Diagnostic diagnostic_;
};

// Turns located diagnostic definitions into Diagnostics for a Consumer. Resolves source
// ranges through the SourceManager (file name, line text, JSON pointer), counts errors,
// and applies the error limit: after `max_errors` errors (0 = unlimited) one
// `TooManyErrors` diagnostic is reported and later errors are dropped.
class Emitter {
 public:
  Emitter(const source::SourceManager& sources, Consumer& consumer, uint32_t max_errors = 0)
      : sources_(sources), consumer_(consumer), max_errors_(max_errors) {}

  // Starts a diagnostic at `range` (an invalid range renders without a location).
  template <typename... Args>
  DiagnosticBuilder Build(const source::SourceRange& range, const DiagnosticDef<Args...>& def,
                          typename internal::Identity<Args>::type... args) {
    DiagnosticBuilder builder(this);
    builder.diagnostic_.level = def.level;
    builder.AddMessage(range, def.kind, def.level, def.format,
                       {internal::ToArg(std::move(args))...});
    return builder;
  }
  // Starts a diagnostic at an already resolved location: a place in a file that is no
  // SourceBuffer of this compilation (a line of a graph file, a program archive), or no file
  // at all (a command-line option): leave `loc.file` empty and `loc.line` 0.
  template <typename... Args>
  DiagnosticBuilder BuildAt(Location loc, const DiagnosticDef<Args...>& def,
                            typename internal::Identity<Args>::type... args) {
    DiagnosticBuilder builder(this);
    builder.diagnostic_.level = def.level;
    builder.AddMessageAt(std::move(loc), def.kind, def.level, def.format,
                         {internal::ToArg(std::move(args))...});
    return builder;
  }
  // Shorthands for Build(...).Emit() and BuildAt(...).Emit().
  template <typename... Args>
  void EmitAt(Location loc, const DiagnosticDef<Args...>& def, typename internal::Identity<Args>::type... args) {
    BuildAt(std::move(loc), def, std::move(args)...).Emit();
  }
  template <typename... Args>
  void Emit(const source::SourceRange& range, const DiagnosticDef<Args...>& def,
            typename internal::Identity<Args>::type... args) {
    Build(range, def, std::move(args)...).Emit();
  }

  uint32_t error_count() const { return error_count_; }
  bool has_errors() const { return error_count_ > 0; }
  // True once the error limit was reached; producers may stop early.
  bool limit_reached() const { return limit_reached_; }

  // Resolves a range to a renderable Location.
  Location Resolve(const source::SourceRange& range) const;

 private:
  friend class DiagnosticBuilder;
  void Report(Diagnostic diagnostic);

  const source::SourceManager& sources_;
  Consumer& consumer_;
  uint32_t max_errors_;
  uint32_t error_count_ = 0;
  bool limit_reached_ = false;
};

}  // namespace weft::diag
