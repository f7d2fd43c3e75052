// The printers of format.h: canonical DSL, canonical JSON, and the AST dump.
#include "compiler/syntax/format.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace weft::syntax {
namespace {

using Json = nlohmann::ordered_json;

std::string Indent(int n) { return std::string(static_cast<size_t>(n), ' '); }

std::string CommentLine(const std::string& text) { return text.empty() ? "#" : "# " + text; }

void Leading(const std::vector<std::string>& lines, int indent, std::string& out) {
  for (const std::string& line : lines) out += Indent(indent) + CommentLine(line) + "\n";
}

void EndLine(const Comments& comments, std::string& out) {
  if (comments.trailing) out += "  " + CommentLine(*comments.trailing);
  out += "\n";
}

std::string TargetText(const Target& target) {
  switch (target.kind) {
    case TargetKind::kArgument:
      return target.argument.text;
    case TargetKind::kArgumentElement:
      return target.argument.text + "[" + std::to_string(target.index.value) + "]";
    case TargetKind::kOutput:
      return "output " + std::to_string(target.index.value);
  }
  return "";
}

// A `calls` item is the argument alone (it has no fields).
std::string FieldsText(const ShardItem& item, CpRuleKind kind) {
  if (kind == CpRuleKind::kCalls) return "";
  std::string out = "dim " + std::to_string(item.dim.value);
  if (item.rank) out += " rank " + std::to_string(item.rank->value);
  if (item.optional) out += " optional";
  return out;
}

std::string Quoted(const Pattern& pattern) { return "\"" + pattern.text + "\""; }

std::string PackedText(const Packed& packed) {
  std::string out = "packed [";
  for (size_t i = 0; i < packed.blocks.size(); ++i) {
    if (i > 0) out += ", ";
    const BlockSize& b = packed.blocks[i];
    out += b.is_name ? b.name : std::to_string(b.value);
  }
  return out + "]";
}

bool Inline(const CpRule& rule) {
  return rule.items.size() == 1 && rule.items[0].comments.empty() && rule.end_comments.empty();
}

void PrintCpRule(const CpRule& rule, std::string& out) {
  Leading(rule.comments.leading, 2, out);
  out += "  " + std::string(CpRuleKindName(rule.kind)) + " " + Quoted(rule.pattern);
  if (rule.kind == CpRuleKind::kAttention) {
    out += " " + std::string(AttentionModeName(rule.mode));
    EndLine(rule.comments, out);
    return;
  }
  if (Inline(rule)) {
    const ShardItem& item = rule.items[0];
    const std::string fields = FieldsText(item, rule.kind);
    out += " " + TargetText(item.target) + (fields.empty() ? "" : " " + fields);
    EndLine(rule.comments, out);
    return;
  }
  out += " {";
  EndLine(rule.comments, out);
  size_t width = 0;
  for (const ShardItem& item : rule.items) width = std::max(width, TargetText(item.target).size());
  for (const ShardItem& item : rule.items) {
    Leading(item.comments.leading, 4, out);
    std::string target = TargetText(item.target);
    const std::string fields = FieldsText(item, rule.kind);
    out += "    " + target + (fields.empty() ? "" : std::string(width - target.size() + 2, ' ') + fields);
    EndLine(item.comments, out);
  }
  Leading(rule.end_comments, 4, out);
  out += "  }\n";
}

void PrintTpRule(const TpRule& rule, std::string& out) {
  Leading(rule.comments.leading, 2, out);
  out += "  " + std::string(TpStyleName(rule.style)) + " " + Quoted(rule.pattern);
  if (rule.packed) out += " " + PackedText(*rule.packed);
  if (rule.optional) out += " optional";
  EndLine(rule.comments, out);
}

// ---- JSON ------------------------------------------------------------------------------
void AddComments(const Comments& comments, Json& j) {
  if (!comments.leading.empty()) j["comments"] = comments.leading;
  if (comments.trailing) j["comment"] = *comments.trailing;
}

Json ItemJson(const ShardItem& item, CpRuleKind kind) {
  Json j = Json::object();
  switch (item.target.kind) {
    case TargetKind::kArgument:
      j["argument"] = item.target.argument.text;
      break;
    case TargetKind::kArgumentElement:
      j["argument"] = item.target.argument.text;
      j["element"] = item.target.index.value;
      break;
    case TargetKind::kOutput:
      j["output"] = item.target.index.value;
      break;
  }
  if (kind != CpRuleKind::kCalls) j["dim"] = item.dim.value;
  if (item.rank) j["rank"] = item.rank->value;
  if (item.optional) j["optional"] = true;
  AddComments(item.comments, j);
  return j;
}

Json CpRuleJson(const CpRule& rule) {
  Json j = Json::object();
  j[CpRuleKindName(rule.kind)] = rule.pattern.text;
  if (rule.kind == CpRuleKind::kAttention) {
    j["mode"] = AttentionModeName(rule.mode);
  } else {
    j["items"] = Json::array();
    for (const ShardItem& item : rule.items) j["items"].push_back(ItemJson(item, rule.kind));
  }
  AddComments(rule.comments, j);
  if (!rule.end_comments.empty()) j["end_comments"] = rule.end_comments;
  return j;
}

Json TpRuleJson(const TpRule& rule) {
  Json j = Json::object();
  j[TpStyleName(rule.style)] = rule.pattern.text;
  if (rule.packed) {
    j["packed"] = Json::array();
    for (const BlockSize& b : rule.packed->blocks) {
      if (b.is_name) j["packed"].push_back(b.name);
      else j["packed"].push_back(b.value);
    }
  }
  if (rule.optional) j["optional"] = true;
  AddComments(rule.comments, j);
  return j;
}

bool IsScalar(const Json& j) { return !j.is_object() && !j.is_array(); }

// Objects and arrays that hold only scalars (or arrays of scalars) go on one line.
bool IsFlat(const Json& j) {
  if (IsScalar(j)) return true;
  for (const auto& element : j) {
    if (element.is_object()) return false;
    if (element.is_array()) {
      for (const auto& inner : element) {
        if (!IsScalar(inner)) return false;
      }
    }
  }
  return true;
}

void WriteJson(const Json& j, int indent, std::string& out) {
  if (IsScalar(j)) {
    out += j.dump();
    return;
  }
  const bool object = j.is_object();
  if (j.empty()) {
    out += object ? "{}" : "[]";
    return;
  }
  if (IsFlat(j)) {
    out += object ? "{" : "[";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      if (object) out += Json(it.key()).dump() + ": ";
      WriteJson(it.value(), indent, out);
    }
    out += object ? "}" : "]";
    return;
  }
  out += object ? "{\n" : "[\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out += Indent(indent + 2);
    if (object) out += Json(it.key()).dump() + ": ";
    WriteJson(it.value(), indent + 2, out);
  }
  out += "\n" + Indent(indent) + (object ? "}" : "]");
}

// ---- dump ------------------------------------------------------------------------------
std::string At(const SourceRange& range, const DumpOptions& options) {
  if (!options.locations || !range.valid()) return "";
  return " @" + std::to_string(range.line) + ":" + std::to_string(range.col);
}

std::string Error(bool has_error) { return has_error ? " <error>" : ""; }

}  // namespace

std::string PrintDsl(const PlanAst& plan) {
  std::string out;
  Leading(plan.comments.leading, 0, out);
  out += "plan " + plan.name.text + " for " + plan.model.text;
  EndLine(plan.comments, out);
  auto split_section = [&](const std::optional<ContextParallelSection>& section, const char* name) {
    if (!section) return;
    out += "\n";
    Leading(section->comments.leading, 0, out);
    out += std::string(name) + " {";
    EndLine(section->comments, out);
    for (const CpRule& rule : section->rules) PrintCpRule(rule, out);
    Leading(section->end_comments, 2, out);
    out += "}\n";
  };
  split_section(plan.context_parallel, "context_parallel");
  if (plan.tensor_parallel) {
    const TensorParallelSection& tp = *plan.tensor_parallel;
    out += "\n";
    Leading(tp.comments.leading, 0, out);
    out += "tensor_parallel {";
    EndLine(tp.comments, out);
    for (const TpRule& rule : tp.rules) PrintTpRule(rule, out);
    Leading(tp.end_comments, 2, out);
    out += "}\n";
  }
  split_section(plan.guidance_parallel, "guidance_parallel");
  if (!plan.end_comments.empty()) {
    out += "\n";
    Leading(plan.end_comments, 0, out);
  }
  return out;
}

std::string PrintJson(const PlanAst& plan) {
  Json j = Json::object();
  j["weft_plan"] = 1;
  j["name"] = plan.name.text;
  j["model"] = plan.model.text;
  AddComments(plan.comments, j);
  auto split_section = [&](const std::optional<ContextParallelSection>& section, const char* name) {
    if (!section) return;
    Json cp = Json::object();
    AddComments(section->comments, cp);
    cp["rules"] = Json::array();
    for (const CpRule& rule : section->rules) cp["rules"].push_back(CpRuleJson(rule));
    if (!section->end_comments.empty()) cp["end_comments"] = section->end_comments;
    j[name] = std::move(cp);
  };
  split_section(plan.context_parallel, "context_parallel");
  if (plan.tensor_parallel) {
    Json tp = Json::object();
    AddComments(plan.tensor_parallel->comments, tp);
    tp["rules"] = Json::array();
    for (const TpRule& rule : plan.tensor_parallel->rules) tp["rules"].push_back(TpRuleJson(rule));
    if (!plan.tensor_parallel->end_comments.empty()) tp["end_comments"] = plan.tensor_parallel->end_comments;
    j["tensor_parallel"] = std::move(tp);
  }
  split_section(plan.guidance_parallel, "guidance_parallel");
  if (!plan.end_comments.empty()) j["end_comments"] = plan.end_comments;
  std::string out;
  WriteJson(j, 0, out);
  return out + "\n";
}

std::string Dump(const PlanAst& plan, const DumpOptions& options) {
  std::string out = "plan " + plan.name.text + " for " + plan.model.text +
                    At(plan.header_range, options) + Error(plan.has_error) + "\n";
  auto split_section = [&](const std::optional<ContextParallelSection>& section, const char* name) {
    if (!section) return;
    out += std::string(name) + At(section->range, options) + "\n";
    for (const CpRule& rule : section->rules) {
      out += "  " + std::string(CpRuleKindName(rule.kind)) + " " + Quoted(rule.pattern);
      if (rule.kind == CpRuleKind::kAttention) out += " " + std::string(AttentionModeName(rule.mode));
      out += At(rule.range, options) + Error(rule.has_error) + "\n";
      for (const ShardItem& item : rule.items) {
        const std::string fields = FieldsText(item, rule.kind);
        out += "    " + TargetText(item.target) + (fields.empty() ? "" : " " + fields) + At(item.range, options) +
               Error(item.has_error) + "\n";
      }
    }
  };
  split_section(plan.context_parallel, "context_parallel");
  if (plan.tensor_parallel) {
    out += "tensor_parallel" + At(plan.tensor_parallel->range, options) + "\n";
    for (const TpRule& rule : plan.tensor_parallel->rules) {
      out += "  " + std::string(TpStyleName(rule.style)) + " " + Quoted(rule.pattern);
      if (rule.packed) out += " " + PackedText(*rule.packed);
      if (rule.optional) out += " optional";
      out += At(rule.range, options) + Error(rule.has_error) + "\n";
    }
  }
  split_section(plan.guidance_parallel, "guidance_parallel");
  return out;
}

}  // namespace weft::syntax
