// `weft dump --phase=parse FILE`: the output of a compiler phase in its canonical text form
// (what golden tests compare). The parse phase prints the PlanAst.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <string>

#include "compiler/compile.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"

namespace weft::driver {
namespace {

struct DumpOptions {
  std::string file;
  std::string phase = "parse";
  bool no_locations = false;
  uint32_t max_errors = 20;
};

int RunDump(const DumpOptions& options) {
  source::SourceManager sources;
  std::string error;
  std::optional<source::SourceBuffer> buffer = source::SourceBuffer::FromFile(options.file, &error);
  if (!buffer) {
    std::cerr << "weft dump: " << error << "\n";
    return 2;
  }
  const source::SourceBuffer& src = sources.Get(sources.Add(std::move(*buffer)));
  diag::TextRenderer renderer(std::cerr);
  diag::SortingConsumer sorted(renderer);
  diag::Emitter diags(sources, sorted, options.max_errors);
  std::optional<syntax::PlanAst> plan = syntax::ParsePlan(src, diags);
  sorted.Flush();
  if (plan) {
    syntax::DumpOptions dump;
    dump.locations = !options.no_locations;
    std::cout << syntax::Dump(*plan, dump);
  }
  return diags.has_errors() ? 1 : 0;
}

}  // namespace

Command MakeDumpCommand(CLI::App& weft) {
  auto options = std::make_shared<DumpOptions>();
  CLI::App* app = weft.add_subcommand("dump", "Print the output of a compiler phase");
  app->add_option("file", options->file, "Plan file (.weft or .json)")->required()->check(CLI::ExistingFile);
  app->add_option("--phase", options->phase, "Phase whose output to print: parse")
      ->check(CLI::IsMember({"parse"}));
  app->add_flag("--no-locations", options->no_locations, "Omit @line:col from the dump");
  app->add_option("--max-errors", options->max_errors, "Stop after this many errors (0: no limit)");
  return Command{app, [options] { return RunDump(*options); }};
}

}  // namespace weft::driver
