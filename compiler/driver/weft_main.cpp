// `weft`: the plan compiler's command line. It never links LibTorch, so CI of model repos
// can run it anywhere.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "compiler/driver/commands.h"
#include "compiler/source/output_file.h"
#include "compiler/source/version.h"

namespace weft::driver {
// Subcommand factories, one per *_command.cpp.
Command MakeFmtCommand(CLI::App& weft);
Command MakeDumpCommand(CLI::App& weft);
Command MakeCheckCommand(CLI::App& weft);
Command MakeCompileCommand(CLI::App& weft);
Command MakeExplainCommand(CLI::App& weft);
Command MakeProgramCommand(CLI::App& weft);
Command MakeSuggestCommand(CLI::App& weft);
}  // namespace weft::driver

int main(int argc, char** argv) {
  using namespace weft::driver;
  CLI::App weft{"weft: compile and check parallelism plans for diffusion transformers"};
  weft.set_version_flag("--version", std::string(weft::VersionLine()));
  weft.require_subcommand(0, 1);

  const std::vector<CommandFactory> factories = {MakeFmtCommand,     MakeDumpCommand,    MakeCheckCommand,
                                                  MakeCompileCommand, MakeExplainCommand, MakeProgramCommand,
                                                  MakeSuggestCommand};
  std::vector<Command> commands;
  for (CommandFactory make : factories) commands.push_back(make(weft));

  try {
    weft.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return weft.exit(e) == 0 ? 0 : 2;
  }
  int status = 0;
  bool ran = false;
  for (Command& command : commands) {
    if (command.app->parsed()) {
      status = command.run();
      ran = true;
      break;
    }
  }
  if (!ran) std::fputs(weft.help().c_str(), stdout);
  // Output to a full disk or a closed pipe shows only now: never exit 0 with it lost.
  if (const std::string failure = weft::source::StdoutFailure(); !failure.empty()) {
    std::fprintf(stderr, "weft: error: cannot write to stdout: %s\n", failure.c_str());
    return status != 0 ? status : 1;
  }
  return status;
}
