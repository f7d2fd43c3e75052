// `weft fmt`: prints a plan in canonical form, as DSL (default) or JSON, checks that files
// are canonical (`--check`, exit 1 and a diff when not), or rewrites them (`--write`).
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/source/output_file.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"

namespace weft::driver {
namespace {

struct FmtOptions {
  std::vector<std::string> files;
  std::string to;  // "", "dsl" or "json"; "" = DSL, or with --check/--write the file's own form
  bool check = false;
  bool write = false;
  std::string output;
  std::string format = "text";
  uint32_t max_errors = 20;
};

bool IsJsonPath(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// A unified diff (3 lines of context) from `a` to `b`, by longest common subsequence.
std::string UnifiedDiff(const std::string& a_name, const std::string& b_name,
                        const std::string& a_text, const std::string& b_text) {
  std::vector<std::string> a = Lines(a_text), b = Lines(b_text);
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Op {
    char tag;  // ' ', '-', '+'
    size_t a, b;
  };
  std::vector<Op> ops;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ops.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      ops.push_back({'-', i++, j});  // deletions before insertions, as diff(1) prints them
    } else {
      ops.push_back({'+', i, j++});
    }
  }
  std::string out = "--- " + a_name + "\n+++ " + b_name + "\n";
  const size_t kContext = 3;
  size_t k = 0;
  while (k < ops.size()) {
    if (ops[k].tag == ' ') {
      ++k;
      continue;
    }
    size_t begin = k >= kContext ? k - kContext : 0;
    size_t end = k;
    // Extend the hunk while changes are within 2 * context of each other.
    size_t last_change = k;
    while (end < ops.size()) {
      if (ops[end].tag != ' ') last_change = end;
      if (end - last_change > 2 * kContext) break;
      ++end;
    }
    end = std::min(ops.size(), last_change + kContext + 1);
    size_t a_start = ops[begin].a, b_start = ops[begin].b, a_count = 0, b_count = 0;
    std::string body;
    for (size_t x = begin; x < end; ++x) {
      const Op& op = ops[x];
      if (op.tag != '+') ++a_count;
      if (op.tag != '-') ++b_count;
      body += op.tag;
      body += op.tag == '+' ? b[op.b] : a[op.a];
      body += '\n';
    }
    out += "@@ -" + std::to_string(a_count ? a_start + 1 : a_start) + "," + std::to_string(a_count) +
           " +" + std::to_string(b_count ? b_start + 1 : b_start) + "," + std::to_string(b_count) +
           " @@\n" + body;
    k = end;
  }
  return out;
}

std::unique_ptr<diag::Consumer> MakeRenderer(const std::string& format) {
  if (format == "json") return std::make_unique<diag::JsonRenderer>(std::cerr);
  if (format == "sarif") return std::make_unique<diag::SarifRenderer>(std::cerr, kVersion);
  return std::make_unique<diag::TextRenderer>(std::cerr);
}

int RunFmt(const FmtOptions& options) {
  if (options.check && options.write) {
    std::cerr << "weft fmt: --check and --write exclude each other\n";
    return 2;
  }
  if (!options.output.empty() && (options.files.size() != 1 || options.check || options.write)) {
    std::cerr << "weft fmt: -o takes exactly one input file and no --check/--write\n";
    return 2;
  }
  source::SourceManager sources;
  std::unique_ptr<diag::Consumer> renderer = MakeRenderer(options.format);
  diag::SortingConsumer sorted(*renderer);
  diag::Emitter diags(sources, sorted, options.max_errors);
  int status = 0;
  std::string printed;
  for (const std::string& path : options.files) {
    std::string error;
    std::optional<source::SourceBuffer> buffer = source::SourceBuffer::FromFile(path, &error);
    if (!buffer) {
      std::cerr << "weft fmt: " << error << "\n";
      status = 2;
      continue;
    }
    const source::SourceBuffer& src = sources.Get(sources.Add(std::move(*buffer)));
    uint32_t errors_before = diags.error_count();
    std::optional<syntax::PlanAst> plan = syntax::ParsePlan(src, diags);
    if (!plan || plan->has_error || diags.error_count() > errors_before) {
      status = std::max(status, 1);
      continue;  // never reformat a plan with errors: the output could drop its broken parts
    }
    bool json = options.to.empty() ? (options.check || options.write) && IsJsonPath(path)
                                   : options.to == "json";
    std::string canonical = json ? syntax::PrintJson(*plan) : syntax::PrintDsl(*plan);
    // The canonical form has no byte order mark (UTF-8 needs none; JSON forbids one): --check
    // reports one, --write drops it, printing never writes one.
    if (options.check) {
      if (src.had_byte_order_mark()) {
        std::cout << path << ": starts with a UTF-8 byte order mark; the canonical form has none\n";
        status = std::max(status, 1);
      }
      if (canonical != src.text()) {
        std::cout << UnifiedDiff(path, path + " (canonical)", src.text(), canonical);
        status = std::max(status, 1);
      }
    } else if (options.write) {
      if (canonical != src.text() || src.had_byte_order_mark()) {
        try {
          source::WriteFileOrThrow(path, canonical);
        } catch (const std::runtime_error& e) {
          std::cerr << "weft fmt: " << e.what() << "\n";
          status = 2;
        }
      }
    } else {
      printed += canonical;
    }
  }
  sorted.Flush();
  if (!printed.empty() && status != 2) {
    if (options.output.empty()) {
      std::cout << printed;
    } else {
      try {
        source::WriteFileOrThrow(options.output, printed);
      } catch (const std::runtime_error& e) {
        std::cerr << "weft fmt: " << e.what() << "\n";
        return 2;
      }
    }
  }
  return status;
}

}  // namespace

Command MakeFmtCommand(CLI::App& weft) {
  auto options = std::make_shared<FmtOptions>();
  CLI::App* app = weft.add_subcommand(
      "fmt", "Print plans in canonical form (DSL or JSON), or check that they are");
  app->add_option("files", options->files, "Plan files (.weft DSL, .json JSON form)")
      ->required()
      ->check(CLI::ExistingFile);
  app->add_option("--to", options->to, "Output form: dsl (default) or json")
      ->check(CLI::IsMember({"dsl", "json"}));
  app->add_flag("--check", options->check,
                "Exit 1 and print a diff for each file that is not in canonical form");
  app->add_flag("-w,--write", options->write, "Rewrite files in place in canonical form");
  app->add_option("-o,--output", options->output, "Write the result to this file");
  app->add_option("--format", options->format, "Diagnostics format: text, json or sarif")
      ->check(CLI::IsMember({"text", "json", "sarif"}));
  app->add_option("--max-errors", options->max_errors, "Stop after this many errors (0: no limit)");
  return Command{app, [options] { return RunFmt(*options); }};
}

}  // namespace weft::driver
