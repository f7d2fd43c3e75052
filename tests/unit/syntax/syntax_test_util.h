#pragma once

#include <string>

#include "compiler/diag/consumer.h"
#include "compiler/syntax/format.h"
#include "compiler/syntax/parse.h"

namespace weft::syntax {

// Parses `text` as `name` (DSL or JSON by extension) and keeps the rendered diagnostics.
struct ParseOutcome {
  source::SourceManager sources;
  std::optional<PlanAst> plan;
  std::string diagnostics;
  uint32_t errors = 0;
};

inline std::unique_ptr<ParseOutcome> ParseText(const std::string& name, const std::string& text,
                                               uint32_t max_errors = 0) {
  auto out = std::make_unique<ParseOutcome>();
  const source::SourceBuffer& src = out->sources.Get(out->sources.Add(source::SourceBuffer(name, text)));
  diag::CollectingConsumer collected;
  diag::SortingConsumer sorted(collected);
  diag::Emitter diags(out->sources, sorted, max_errors);
  out->plan = ParsePlan(src, diags);
  sorted.Flush();
  for (const diag::Diagnostic& d : collected.diagnostics()) out->diagnostics += diag::RenderText(d);
  out->errors = diags.error_count();
  return out;
}

}  // namespace weft::syntax
