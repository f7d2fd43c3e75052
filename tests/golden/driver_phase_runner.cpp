// Golden runner of the `weft` command line (testdata/driver/): runs the built `weft` binary on
// the case's input, from the case's directory, and renders
//   stderr             what it printed on stderr (the default, text format)
//   stdout             what it printed on stdout (same run)
//   status             its exit status
//   diagnostics-json   stdout of the same command with --format=json (only when present)
//   sarif              stdout of the same command with --format=sarif (only when present),
//                      the tool version replaced by `<version>`
// Directive `# ARGS: check --graph ../../graphs/x.graph.json --mesh ulysses=2`: the subcommand
// and its arguments; the case's file name is inserted after the subcommand. Paths are relative
// to the case's directory: `../../graphs/` holds the synthetic graphs of tests/golden/graphs,
// `../../../../graphs/` the committed ones.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/golden/golden_support.h"

namespace weft::golden {
namespace {

std::string Quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct Run {
  std::string out, err;
  int status = -1;
};

Run RunWeft(const std::string& dir, const std::vector<std::string>& args) {
  static int counter = 0;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("weft-golden-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::string command = "cd " + Quote(dir) + " && LC_ALL=C " + Quote(WEFT_BINARY);
  for (const std::string& a : args) command += " " + Quote(a);
  command += " >" + Quote(tmp.string() + ".out") + " 2>" + Quote(tmp.string() + ".err");
  const int raw = std::system(command.c_str());
  Run run;
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.out = ReadFile(tmp.string() + ".out");
  run.err = ReadFile(tmp.string() + ".err");
  std::filesystem::remove(tmp.string() + ".out");
  std::filesystem::remove(tmp.string() + ".err");
  return run;
}

bool HasSection(const Expected& expected, const std::string& name) {
  for (const auto& [section, body] : expected.sections) {
    if (section == name) return true;
  }
  return false;
}

std::map<std::string, std::string> RunDriverPhase(const std::string& path, const Expected& expected) {
  std::map<std::string, std::string> out;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const std::string name = std::filesystem::path(path).filename().string();
  std::vector<std::string> args;
  std::istringstream words(Directive(expected, "ARGS"));
  std::string word;
  while (words >> word) {
    args.push_back(word);
    if (args.size() == 1) args.push_back(name);
  }
  if (args.empty()) args = {"check", name};
  Run text = RunWeft(dir, args);
  out["stderr"] = text.err;
  out["stdout"] = text.out;
  out["status"] = std::to_string(text.status) + "\n";
  for (const char* format : {"json", "sarif"}) {
    const std::string section = std::string(format) == "json" ? "diagnostics-json" : "sarif";
    if (!HasSection(expected, section)) continue;
    std::vector<std::string> with_format = args;
    with_format.push_back(std::string("--format=") + format);
    std::string document = RunWeft(dir, with_format).out;
    if (section == "sarif") {
      document = std::regex_replace(document, std::regex("\"version\": \"weft [^\"]*\""), "\"version\": \"<version>\"");
    }
    out[section] = document;
  }
  return out;
}

const bool kDriverRunner = RegisterPhaseRunner("driver", &RunDriverPhase);

}  // namespace
}  // namespace weft::golden
