#include "tests/fuzz/plan_fuzz_targets.h"

#include <sstream>

#include "compiler/diag/consumer.h"
#include "compiler/syntax/format.h"
#include "compiler/syntax/parse.h"

namespace weft::fuzz {
namespace {

struct Result {
  std::optional<syntax::PlanAst> plan;
  uint32_t errors = 0;
  std::string first_error;
};

Result Parse(const std::string& name, const std::string& text) {
  source::SourceManager sources;
  const source::SourceBuffer& src = sources.Get(sources.Add(source::SourceBuffer(name, text)));
  diag::CollectingConsumer collected;
  diag::Emitter diags(sources, collected, 50);
  Result result;
  result.plan = syntax::ParsePlan(src, diags);
  result.errors = diags.error_count();
  // Every diagnostic must render in every format.
  std::ostringstream sink;
  diag::JsonRenderer json(sink);
  diag::SarifRenderer sarif(sink, "fuzz");
  for (const diag::Diagnostic& d : collected.diagnostics()) {
    std::string text_form = diag::RenderText(d);
    if (result.first_error.empty()) result.first_error = text_form;
    json.Handle(d);
    sarif.Handle(d);
  }
  json.Flush();
  sarif.Flush();
  return result;
}

// Round-trip idempotence, what `weft fmt` and `weft fmt --check` rely on: for both printed
// forms, parse -> print -> parse -> print gives the same text and the same AST, and each form
// reads back to the AST of the other.
std::string CheckRoundTrips(const syntax::PlanAst& plan, const std::string& name, const std::string& input) {
  syntax::DumpOptions no_locations;
  no_locations.locations = false;
  const std::string dump = syntax::Dump(plan, no_locations);
  const std::string dsl = syntax::PrintDsl(plan);
  Result again = Parse("printed.weft", dsl);
  if (!again.plan || again.errors > 0) return "printed DSL does not parse:\n" + dsl + "\n" + again.first_error;
  if (syntax::Dump(*again.plan, no_locations) != dump) return "printed DSL parses to another AST:\n" + dsl;
  if (syntax::PrintDsl(*again.plan) != dsl) return "DSL printing is not a fixed point:\n" + dsl;
  const std::string json = syntax::PrintJson(plan);
  Result from_json = Parse("printed.json", json);
  if (!from_json.plan || from_json.errors > 0) return "printed JSON does not parse:\n" + json + "\n" + from_json.first_error;
  if (syntax::Dump(*from_json.plan, no_locations) != dump) return "printed JSON reads to another AST:\n" + json;
  if (syntax::PrintJson(*from_json.plan) != json) return "JSON printing is not a fixed point:\n" + json;
  if (syntax::PrintDsl(*from_json.plan) != dsl) return "DSL -> JSON -> DSL changes the text:\n" + dsl;
  if (syntax::PrintJson(*again.plan) != json) return "JSON -> DSL -> JSON changes the text:\n" + json;
  // A leading byte order mark changes nothing (one: a second is a character of the text).
  if (input.compare(0, 3, "\xEF\xBB\xBF") == 0) return "";
  Result with_bom = Parse(name, "\xEF\xBB\xBF" + input);
  if (!with_bom.plan || with_bom.errors > 0 || syntax::Dump(*with_bom.plan, no_locations) != dump) {
    return "a leading byte order mark changes the parse:\n" + with_bom.first_error;
  }
  return "";
}

std::string Check(const std::string& name, const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  Result result = Parse(name, text);
  if (result.errors == 0) {
    if (!result.plan) return "no AST and no error diagnostic";
    if (result.plan->has_error) return "an AST node has has_error but no error was reported";
    return CheckRoundTrips(*result.plan, name, text);
  }
  if (result.plan && !result.plan->has_error) return "errors were reported but the AST has no has_error";
  return "";
}

}  // namespace

std::string CheckDslInput(const uint8_t* data, size_t size) { return Check("fuzz.weft", data, size); }
std::string CheckJsonInput(const uint8_t* data, size_t size) { return Check("fuzz.json", data, size); }

}  // namespace weft::fuzz
