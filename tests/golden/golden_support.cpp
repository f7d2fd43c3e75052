#include "tests/golden/golden_support.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/compile.h"

namespace weft::golden {

Expected ParseExpected(const std::string& text) {
  Expected expected;
  std::istringstream in(text);
  std::string line;
  std::string* body = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("---- ", 0) == 0) {
      expected.sections.emplace_back(line.substr(5), "");
      body = &expected.sections.back().second;
    } else if (body != nullptr) {
      *body += line + "\n";
    } else if (line.rfind("# ", 0) == 0) {
      expected.directives.push_back(line);
    }
  }
  return expected;
}

std::string FormatExpected(const Expected& expected) {
  std::string out;
  for (const std::string& d : expected.directives) out += d + "\n";
  for (const auto& [name, body] : expected.sections) out += "---- " + name + "\n" + body;
  return out;
}

std::string Directive(const Expected& expected, const std::string& name) {
  std::string prefix = "# " + name + ":";
  for (const std::string& d : expected.directives) {
    if (d.rfind(prefix, 0) == 0) {
      std::string value = d.substr(prefix.size());
      value.erase(0, value.find_first_not_of(' '));
      return value;
    }
  }
  return "";
}

std::map<std::string, std::string> RunParsePhase(const std::string& path, const std::string& args) {
  uint32_t max_errors = 20;
  size_t at = args.find("--max-errors=");
  if (at != std::string::npos) max_errors = static_cast<uint32_t>(std::stoul(args.substr(at + 13)));

  source::SourceManager sources;
  std::string name = std::filesystem::path(path).filename().string();
  const source::SourceBuffer& src = sources.Get(sources.Add(source::SourceBuffer(name, ReadFile(path))));
  diag::CollectingConsumer collected;
  diag::SortingConsumer sorted(collected);
  diag::Emitter diags(sources, sorted, max_errors);
  std::optional<syntax::PlanAst> plan = syntax::ParsePlan(src, diags);
  sorted.Flush();

  std::map<std::string, std::string> out;
  std::string text;
  for (const diag::Diagnostic& d : collected.diagnostics()) text += diag::RenderText(d);
  out["stderr"] = text;
  out["ast"] = plan ? syntax::Dump(*plan) : "<none>\n";
  if (plan && !diags.has_errors()) {
    out["fmt"] = syntax::PrintDsl(*plan);
    out["json"] = syntax::PrintJson(*plan);
  }
  std::ostringstream json, sarif;
  diag::JsonRenderer json_renderer(json);
  diag::SarifRenderer sarif_renderer(sarif, "test");
  for (const diag::Diagnostic& d : collected.diagnostics()) {
    json_renderer.Handle(d);
    sarif_renderer.Handle(d);
  }
  json_renderer.Flush();
  sarif_renderer.Flush();
  out["diagnostics-json"] = json.str();
  out["sarif"] = sarif.str();
  return out;
}

namespace {
std::map<std::string, PhaseRunner>& Runners() {
  static std::map<std::string, PhaseRunner> runners;
  return runners;
}
std::map<std::string, std::string> RunParseCase(const std::string& path, const Expected& expected) {
  return RunParsePhase(path, Directive(expected, "ARGS"));
}
const bool kParseRunner = RegisterPhaseRunner("parse", &RunParseCase);
}  // namespace

bool RegisterPhaseRunner(const std::string& phase, PhaseRunner runner) {
  Runners()[phase] = runner;
  return true;
}

PhaseRunner FindPhaseRunner(const std::string& phase) {
  (void)kParseRunner;
  auto it = Runners().find(phase);
  return it == Runners().end() ? nullptr : it->second;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

std::vector<std::string> ListFiles(const std::string& dir, const std::vector<std::string>& extensions) {
  std::vector<std::string> files;
  if (!std::filesystem::exists(dir)) return files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::string path = entry.path().string();
    for (const std::string& ext : extensions) {
      if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) {
        files.push_back(path);
        break;
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool UpdateMode() {
  const char* value = std::getenv("WEFT_UPDATE_GOLDENS");
  return value != nullptr && std::string(value) == "1";
}

}  // namespace weft::golden
