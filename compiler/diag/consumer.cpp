#include "compiler/diag/consumer.h"

#include <algorithm>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

namespace weft::diag {

void ErrorTrackingConsumer::Handle(Diagnostic diagnostic) {
  if (diagnostic.level == Level::kError) ++error_count_;
  next_.Handle(std::move(diagnostic));
}

void SortingConsumer::Flush() {
  std::map<std::string, size_t> file_order;
  for (const Diagnostic& d : buffer_) {
    const std::string& file = d.messages.front().loc.file;
    file_order.emplace(file, file_order.size());
  }
  auto key = [&](const Diagnostic& d) {
    const Location& loc = d.messages.front().loc;
    bool unlocated = loc.line == 0;
    return std::make_tuple(loc.file.empty(), file_order[loc.file], unlocated, loc.line, loc.col);
  };
  std::stable_sort(buffer_.begin(), buffer_.end(),
                   [&](const Diagnostic& a, const Diagnostic& b) { return key(a) < key(b); });
  for (Diagnostic& d : buffer_) next_.Handle(std::move(d));
  buffer_.clear();
  next_.Flush();
}

namespace {

void RenderMessage(const Message& m, std::string& out) {
  if (!m.loc.file.empty()) {
    out += m.loc.file;
    if (m.loc.line > 0) {
      out += ':' + std::to_string(m.loc.line) + ':' + std::to_string(m.loc.col);
    }
    out += ": ";
  }
  out += LevelName(m.level);
  out += ": ";
  out += m.text;
  out += " [";
  out += KindName(m.kind);
  out += "]\n";
  if (m.loc.line == 0) return;
  out += "  ";
  out += m.loc.line_text;
  out += '\n';
  // The caret line copies tabs from the source line so the caret stays aligned.
  out += "  ";
  uint32_t col = std::min<uint32_t>(m.loc.col, static_cast<uint32_t>(m.loc.line_text.size()) + 1);
  for (uint32_t i = 0; i + 1 < col; ++i) out += m.loc.line_text[i] == '\t' ? '\t' : ' ';
  // Underline to the end of the span, but not past the end of its first line.
  uint32_t room = static_cast<uint32_t>(m.loc.line_text.size()) + 1 - col;
  uint32_t length = std::max<uint32_t>(1, std::min(m.loc.length, std::max<uint32_t>(room, 1)));
  out += '^';
  out.append(length - 1, '~');
  out += '\n';
  if (!m.loc.json_pointer.empty()) out += "  at " + m.loc.json_pointer + "\n";
}

nlohmann::ordered_json MessageJson(const Message& m) {
  nlohmann::ordered_json j;
  j["kind"] = std::string(KindName(m.kind));
  j["level"] = std::string(LevelName(m.level));
  j["message"] = m.text;
  if (!m.loc.file.empty()) j["file"] = m.loc.file;
  if (m.loc.line > 0) {
    j["line"] = m.loc.line;
    j["column"] = m.loc.col;
    j["length"] = m.loc.length;
  }
  if (!m.loc.json_pointer.empty()) j["json_pointer"] = m.loc.json_pointer;
  return j;
}

nlohmann::ordered_json SarifLocation(const Location& loc) {
  nlohmann::ordered_json l = nlohmann::ordered_json::object();
  if (!loc.file.empty()) {
    nlohmann::ordered_json physical;
    physical["artifactLocation"]["uri"] = loc.file;
    if (loc.line > 0) {
      physical["region"]["startLine"] = loc.line;
      physical["region"]["startColumn"] = loc.col;
      physical["region"]["endColumn"] = loc.col + std::max<uint32_t>(loc.length, 1);
      physical["region"]["snippet"]["text"] = loc.line_text;
    }
    l["physicalLocation"] = physical;
  }
  if (!loc.json_pointer.empty()) {
    l["logicalLocations"] = nlohmann::ordered_json::array(
        {{{"fullyQualifiedName", loc.json_pointer}, {"kind", "member"}}});
  }
  return l;
}

std::string SarifLevel(Level level) {
  return level == Level::kError ? "error" : level == Level::kWarning ? "warning" : "note";
}

}  // namespace

std::string RenderText(const Diagnostic& diagnostic) {
  std::string out;
  for (const Message& m : diagnostic.messages) RenderMessage(m, out);
  return out;
}

void TextRenderer::Handle(Diagnostic diagnostic) { out_ << RenderText(diagnostic); }

void JsonRenderer::Flush() {
  nlohmann::ordered_json doc;
  doc["version"] = 1;
  doc["diagnostics"] = nlohmann::ordered_json::array();
  for (const Diagnostic& d : buffer_) {
    nlohmann::ordered_json j = MessageJson(d.messages.front());
    j["notes"] = nlohmann::ordered_json::array();
    for (size_t i = 1; i < d.messages.size(); ++i) j["notes"].push_back(MessageJson(d.messages[i]));
    doc["diagnostics"].push_back(std::move(j));
  }
  // Replace (never throw on) bytes that are not UTF-8: line_text comes from user files.
  out_ << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  out_.flush();
  buffer_.clear();
}

void SarifRenderer::Flush() {
  // Rules: the kinds that occur, in registry order, so ruleIndex is stable within a log.
  std::set<Kind> used;
  for (const Diagnostic& d : buffer_) used.insert(d.messages.front().kind);
  std::map<Kind, size_t> rule_index;
  nlohmann::ordered_json rules = nlohmann::ordered_json::array();
  for (Kind kind : AllKinds()) {
    if (!used.count(kind)) continue;
    rule_index[kind] = rules.size();
    rules.push_back({{"id", std::string(KindName(kind))},
                     {"name", std::string(KindName(kind))}});
  }
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const Diagnostic& d : buffer_) {
    const Message& m = d.messages.front();
    nlohmann::ordered_json r;
    r["ruleId"] = std::string(KindName(m.kind));
    r["ruleIndex"] = rule_index[m.kind];
    r["level"] = SarifLevel(m.level);
    r["message"]["text"] = m.text;
    r["locations"] = nlohmann::ordered_json::array({SarifLocation(m.loc)});
    if (d.messages.size() > 1) {
      nlohmann::ordered_json related = nlohmann::ordered_json::array();
      for (size_t i = 1; i < d.messages.size(); ++i) {
        nlohmann::ordered_json n = SarifLocation(d.messages[i].loc);
        n["id"] = i;
        n["message"]["text"] = d.messages[i].text + " [" +
                               std::string(KindName(d.messages[i].kind)) + "]";
        related.push_back(std::move(n));
      }
      r["relatedLocations"] = std::move(related);
    }
    results.push_back(std::move(r));
  }
  nlohmann::ordered_json driver;
  driver["name"] = "weft";
  driver["version"] = tool_version_;
  driver["rules"] = std::move(rules);
  nlohmann::ordered_json run;
  run["tool"]["driver"] = std::move(driver);
  run["columnKind"] = "unicodeCodePoints";
  run["results"] = std::move(results);
  nlohmann::ordered_json log;
  log["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  log["version"] = "2.1.0";
  log["runs"] = nlohmann::ordered_json::array({std::move(run)});
  out_ << log.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  out_.flush();
  buffer_.clear();
}

}  // namespace weft::diag
