#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace weft::driver {

// One `weft` subcommand: the CLI11 subcommand it added, and the action that runs it once
// the command line is parsed. The action returns the process exit status: 0 success,
// 1 the input has diagnostics, 2 usage or I/O error.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Each *_command.cpp defines one factory that adds its subcommand to `weft` and binds its
// options; weft_main.cpp lists them.
using CommandFactory = Command (*)(CLI::App& weft);

}  // namespace weft::driver
