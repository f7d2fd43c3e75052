#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/diag/diagnostic.h"

namespace weft::diag {

// Keeps every diagnostic it receives, in arrival order (tests, and callers that decide
// later how to render).
class CollectingConsumer : public Consumer {
 public:
  void Handle(Diagnostic diagnostic) override { diagnostics_.push_back(std::move(diagnostic)); }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  std::vector<Diagnostic> Take() { return std::move(diagnostics_); }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// Forwards to `next` and remembers whether an error went through.
class ErrorTrackingConsumer : public Consumer {
 public:
  explicit ErrorTrackingConsumer(Consumer& next) : next_(next) {}
  void Handle(Diagnostic diagnostic) override;
  void Flush() override { next_.Flush(); }
  bool seen_error() const { return error_count_ > 0; }
  uint32_t error_count() const { return error_count_; }

 private:
  Consumer& next_;
  uint32_t error_count_ = 0;
};

// Buffers diagnostics and, on Flush, forwards them to `next` ordered by file (first
// appearance), then line, then column (stable, so equal positions keep arrival order).
// Diagnostics without a line go after their file's, those without a file last. Then
// flushes `next`.
class SortingConsumer : public Consumer {
 public:
  explicit SortingConsumer(Consumer& next) : next_(next) {}
  void Handle(Diagnostic diagnostic) override { buffer_.push_back(std::move(diagnostic)); }
  void Flush() override;

 private:
  Consumer& next_;
  std::vector<Diagnostic> buffer_;
};

// Output formats of the renderers below.
enum class Format : uint8_t { kText, kJson, kSarif };

// Renders each diagnostic as text as it arrives:
//   file:line:col: error: message [Kind]
//     <source line>
//     ^~~~
// followed by its notes in the same shape. A location inside a JSON plan adds a line
// `  at <json pointer>`.
class TextRenderer : public Consumer {
 public:
  explicit TextRenderer(std::ostream& out) : out_(out) {}
  void Handle(Diagnostic diagnostic) override;
  void Flush() override { out_.flush(); }

 private:
  std::ostream& out_;
};

// Renders one diagnostic as text (what TextRenderer writes for it).
std::string RenderText(const Diagnostic& diagnostic);

// Collects diagnostics and writes one JSON document on Flush:
//   {"version": 1, "diagnostics": [{"kind", "level", "message", "file", "line", "column",
//    "length", "json_pointer"?, "notes": [...]}]}
class JsonRenderer : public Consumer {
 public:
  explicit JsonRenderer(std::ostream& out) : out_(out) {}
  void Handle(Diagnostic diagnostic) override { buffer_.push_back(std::move(diagnostic)); }
  void Flush() override;

 private:
  std::ostream& out_;
  std::vector<Diagnostic> buffer_;
};

// Collects diagnostics and writes a SARIF 2.1.0 log on Flush: one run of tool `weft` whose
// rules are the kinds that occurred; each result has a physical location (uri, region)
// and, for JSON plans, a logical location holding the JSON pointer; notes become
// relatedLocations.
class SarifRenderer : public Consumer {
 public:
  SarifRenderer(std::ostream& out, std::string tool_version)
      : out_(out), tool_version_(std::move(tool_version)) {}
  void Handle(Diagnostic diagnostic) override { buffer_.push_back(std::move(diagnostic)); }
  void Flush() override;

 private:
  std::ostream& out_;
  std::string tool_version_;
  std::vector<Diagnostic> buffer_;
};

}  // namespace weft::diag
