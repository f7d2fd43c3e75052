// ReadJsonPlan: the JSON form of a plan (grammar/plan.schema.json) -> PlanAst. Every value
// visited is annotated on the SourceBuffer with its JSON pointer; every problem is located
// at the offending key or value.
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/syntax/json_value.h"
#include "compiler/syntax/parse.h"
#include "compiler/syntax/pattern_check.h"
#include "compiler/syntax/spelling.h"
#include "compiler/syntax/structure_check.h"

namespace weft::syntax {
namespace {

WEFT_DIAGNOSTIC(JsonSyntax, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(JsonUnknownField, Error, "unknown field `{0}` in {1}{2}", std::string,
                std::string, std::string);
WEFT_DIAGNOSTIC(JsonMissingField, Error, "{0} has no {1}", std::string, std::string);
WEFT_DIAGNOSTIC(JsonWrongType, Error, "`{0}` is {1}; expected {2}", std::string, std::string,
                std::string);
WEFT_DIAGNOSTIC(JsonUnsupportedVersion, Error,
                "plan format version `{0}`; this weft reads `\"weft_plan\": 1`", std::string);
WEFT_DIAGNOSTIC(AttentionInGuidance, Error,
                "`attention` rules belong in `context_parallel`; `guidance_parallel` splits and gathers the "
                "batch of guidance branches, which attention never mixes", );
WEFT_DIAGNOSTIC(JsonAmbiguousRule, Error, "{0} has both `{1}` and `{2}`; give one",
                std::string, std::string, std::string);

using Type = JsonValue::Type;

std::string EscapePointerToken(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// The DSL's keywords: a name spelled like one could not be printed back as DSL.
bool IsKeyword(const std::string& s) {
  static const char* const kKeywords[] = {
      "plan", "for", "context_parallel", "tensor_parallel", "guidance_parallel", "split", "gather", "attention", "calls", "output",
      "dim", "rank", "optional", "packed", "colwise", "rowwise", "replicate", "local"};
  for (const char* keyword : kKeywords) {
    if (s == keyword) return true;
  }
  return false;
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || IsKeyword(s) || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

class JsonPlanReader {
 public:
  JsonPlanReader(const source::SourceBuffer& src, diag::Emitter& diags) : src_(src), diags_(diags) {}

  std::optional<PlanAst> Read() {
    JsonError error;
    std::optional<JsonValue> doc = ParseJson(src_.text(), &error);
    if (!doc) {
      diags_.Emit(src_.RangeAt(src_.id(), error.offset, 1), JsonSyntax, error.message);
      return std::nullopt;
    }
    PlanAst plan;
    plan.file = src_.id();
    Annotate(*doc, "");
    if (!Expect(*doc, Type::kObject, "", "an object")) return std::nullopt;
    plan.header_range = At(*doc);
    // Object fields, in the order the schema lists them.
    Fields fields = Collect(*doc, "", "the plan",
                            {"weft_plan", "name", "model", "comments", "comment",
                             "context_parallel", "tensor_parallel", "guidance_parallel", "end_comments"});
    bool header_ok = true;
    if (const JsonMember* version = fields.Get("weft_plan")) {
      const JsonValue& v = version->value;
      if (v.type != Type::kNumber || !v.is_integer || v.integer != 1) {
        diags_.Emit(At(v), JsonUnsupportedVersion, Raw(v));
        header_ok = false;
      }
    } else {
      diags_.Emit(Brace(*doc), JsonMissingField, "the plan", "`weft_plan` (the format version, 1)");
      header_ok = false;
    }
    header_ok &= ReadIdentifier(fields, *doc, "the plan", "name", plan.name);
    header_ok &= ReadIdentifier(fields, *doc, "the plan", "model", plan.model);
    ReadComments(fields, plan.comments);
    ReadStrings(fields.Get("end_comments"), plan.end_comments);
    if (const JsonMember* cp = fields.Get("context_parallel")) ReadCp(*cp, "context_parallel", plan.context_parallel);
    if (const JsonMember* tp = fields.Get("tensor_parallel")) ReadTp(*tp, plan);
    if (const JsonMember* g = fields.Get("guidance_parallel")) ReadCp(*g, "guidance_parallel", plan.guidance_parallel);
    CheckStructure(plan, diags_);
    if (diags_.error_count() > errors_before_) plan.has_error = true;
    if (!header_ok) return std::nullopt;
    return plan;
  }

 private:
  // The members of one object, checked against its known field names.
  struct Fields {
    std::map<std::string, const JsonMember*> by_name;
    const JsonMember* Get(const std::string& name) const {
      auto it = by_name.find(name);
      return it == by_name.end() ? nullptr : it->second;
    }
    bool Has(const std::string& name) const { return by_name.count(name) > 0; }
    size_t unknown = 0;  // unknown fields already diagnosed
  };

  source::SourceRange At(const JsonValue& v) const { return src_.RangeAt(src_.id(), v.offset, v.length); }
  source::SourceRange Brace(const JsonValue& v) const { return src_.RangeAt(src_.id(), v.offset, 1); }
  source::SourceRange KeyAt(const JsonMember& m) const {
    return src_.RangeAt(src_.id(), m.key_offset, m.key_length);
  }
  std::string Raw(const JsonValue& v) const { return src_.text().substr(v.offset, std::min<uint32_t>(v.length, 40)); }

  void Annotate(const JsonValue& v, const std::string& pointer) {
    src_.AnnotateJsonPointer(v.offset, pointer.empty() ? "/" : pointer);
    if (v.type == Type::kObject) {
      for (const JsonMember& m : v.members) {
        std::string child = pointer + "/" + EscapePointerToken(m.key);
        src_.AnnotateJsonPointer(m.key_offset, child);
        Annotate(m.value, child);
      }
    } else if (v.type == Type::kArray) {
      for (size_t i = 0; i < v.elements.size(); ++i) {
        Annotate(v.elements[i], pointer + "/" + std::to_string(i));
      }
    }
  }

  bool Expect(const JsonValue& v, Type type, const std::string& name, const char* expected) {
    if (v.type == type) return true;
    diags_.Emit(At(v), JsonWrongType, name.empty() ? "/" : name, JsonTypeName(v.type), expected);
    return false;
  }

  Fields Collect(const JsonValue& object, const std::string& /*pointer*/, const std::string& what,
                 const std::vector<std::string>& known) {
    Fields fields;
    for (const JsonMember& m : object.members) {
      bool is_known = false;
      for (const std::string& k : known) is_known |= k == m.key;
      if (!is_known) {
        diags_.Emit(KeyAt(m), JsonUnknownField, m.key, what, SuggestionSuffix(m.key, known));
        ++fields.unknown;
        continue;
      }
      auto [it, inserted] = fields.by_name.emplace(m.key, &m);
      if (!inserted) {
        diags_.Build(KeyAt(m), DuplicateField, m.key).Note(KeyAt(*it->second), PreviousField, m.key).Emit();
      }
    }
    return fields;
  }

  bool ReadIdentifier(const Fields& fields, const JsonValue& object, const std::string& what,
                      const std::string& key, Name& out) {
    const JsonMember* m = fields.Get(key);
    if (m == nullptr) {
      diags_.Emit(Brace(object), JsonMissingField, what, "`" + key + "`");
      return false;
    }
    if (!Expect(m->value, Type::kString, key, "a string")) return false;
    if (!IsIdentifier(m->value.text)) {
      diags_.Emit(At(m->value), JsonWrongType, key, "`" + m->value.text + "`",
                  "an identifier (letters, digits and `_`, not starting with a digit, not a keyword)");
      return false;
    }
    out = Name{m->value.text, At(m->value)};
    return true;
  }

  std::optional<IntLit> ReadInt(const JsonMember& m) {
    const JsonValue& v = m.value;
    if (v.type != Type::kNumber || !v.is_integer || v.integer < 0) {
      diags_.Emit(At(v), JsonWrongType, m.key,
                  v.type == Type::kNumber ? "`" + v.text + "`" : JsonTypeName(v.type),
                  "a non-negative integer");
      return std::nullopt;
    }
    if (v.integer > kMaxInteger) {
      diags_.Emit(At(v), IntegerTooLarge, v.text, kMaxInteger);
      return std::nullopt;
    }
    return IntLit{v.integer, At(v)};
  }

  // Comments are lines of the DSL form: no line breaks.
  bool ExpectCommentLine(const JsonValue& v, const std::string& key) {
    if (!Expect(v, Type::kString, key, "a string")) return false;
    for (char c : v.text) {
      if (c == '\n' || c == '\r') {
        diags_.Emit(At(v), JsonWrongType, key, "a string with a line break",
                    "one line of comment text");
        return false;
      }
    }
    return true;
  }

  // A comment's text as the DSL reads it back from `# text`: trailing blanks are not part of a
  // comment line (the DSL parser drops them), so "x " reads as "x" and the two forms agree
  // (and `weft fmt` of a JSON plan prints a DSL line that is already canonical).
  static std::string CommentText(const std::string& text) {
    size_t end = text.size();
    while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t')) --end;
    return text.substr(0, end);
  }

  void ReadStrings(const JsonMember* m, std::vector<std::string>& out) {
    if (m == nullptr || !Expect(m->value, Type::kArray, m->key, "an array of strings")) return;
    for (const JsonValue& e : m->value.elements) {
      if (ExpectCommentLine(e, m->key)) out.push_back(CommentText(e.text));
    }
  }

  void ReadComments(const Fields& fields, Comments& out) {
    ReadStrings(fields.Get("comments"), out.leading);
    if (const JsonMember* c = fields.Get("comment")) {
      if (ExpectCommentLine(c->value, "comment")) out.trailing = CommentText(c->value.text);
    }
  }

  std::optional<Pattern> ReadPattern(const JsonMember& m) {
    if (!Expect(m.value, Type::kString, m.key, "a pattern string")) return std::nullopt;
    Pattern pattern{m.value.text, At(m.value)};
    if (!CheckPattern(pattern.text, src_, pattern.range, !m.value.string_has_escapes,
                      m.value.offset + 1, diags_)) {
      return std::nullopt;
    }
    return pattern;
  }

  // The one key among `kinds` that `fields` has; diagnoses none or several.
  const JsonMember* OneOf(const Fields& fields, const JsonValue& object, const std::string& what,
                          const std::vector<std::string>& kinds) {
    const JsonMember* found = nullptr;
    for (const std::string& kind : kinds) {
      const JsonMember* m = fields.Get(kind);
      if (m == nullptr) continue;
      if (found != nullptr) {
        diags_.Emit(KeyAt(*m), JsonAmbiguousRule, what, found->key, m->key);
        return nullptr;
      }
      found = m;
    }
    // An unknown field was most likely meant to be the kind (`"colwis"`); it is reported.
    if (found == nullptr && fields.unknown == 0) {
      diags_.Emit(Brace(object), JsonMissingField, what, BacktickedList(kinds));
    }
    return found;
  }

  // ---- context_parallel ------------------------------------------------------------------
  // context_parallel, or guidance_parallel (the same rules without `attention`).
  void ReadCp(const JsonMember& section, const std::string& name, std::optional<ContextParallelSection>& slot) {
    if (!Expect(section.value, Type::kObject, section.key, "an object")) return;
    ContextParallelSection cp;
    cp.range = KeyAt(section);
    Fields fields = Collect(section.value, "", "`" + name + "`", {"comments", "comment", "rules", "end_comments"});
    ReadComments(fields, cp.comments);
    ReadStrings(fields.Get("end_comments"), cp.end_comments);
    if (const JsonMember* rules = fields.Get("rules")) {
      if (Expect(rules->value, Type::kArray, "rules", "an array of rules")) {
        for (const JsonValue& rule : rules->value.elements) ReadCpRule(rule, cp.rules);
      }
    }
    if (name == "guidance_parallel") {
      for (CpRule& rule : cp.rules) {
        if (rule.kind != CpRuleKind::kAttention || rule.has_error) continue;
        diags_.Emit(rule.keyword_range, AttentionInGuidance);
        rule.has_error = true;
      }
    }
    slot = std::move(cp);
  }

  void ReadCpRule(const JsonValue& v, std::vector<CpRule>& rules) {
    if (!Expect(v, Type::kObject, "rules", "a rule object")) return;
    CpRule rule;
    rule.range = At(v);
    Fields fields = Collect(v, "", "a context-parallel rule",
                            {"split", "gather", "attention", "calls", "items", "mode", "comments",
                             "comment", "end_comments"});
    ReadComments(fields, rule.comments);
    ReadStrings(fields.Get("end_comments"), rule.end_comments);
    const JsonMember* kind = OneOf(fields, v, "a context-parallel rule", {"split", "gather", "attention", "calls"});
    if (kind == nullptr) {
      rule.has_error = true;
      rules.push_back(std::move(rule));
      return;
    }
    rule.keyword_range = KeyAt(*kind);
    rule.kind = kind->key == "split"    ? CpRuleKind::kSplit
                : kind->key == "gather" ? CpRuleKind::kGather
                : kind->key == "calls"  ? CpRuleKind::kCalls
                                        : CpRuleKind::kAttention;
    if (auto pattern = ReadPattern(*kind)) rule.pattern = *pattern; else rule.has_error = true;
    const std::string what = "the `" + kind->key + "` rule";
    if (rule.kind == CpRuleKind::kAttention) {
      if (const JsonMember* items = fields.Get("items")) {
        diags_.Emit(KeyAt(*items), JsonUnknownField, "items", what, "; expected `mode`");
        rule.has_error = true;
      }
      const JsonMember* mode = fields.Get("mode");
      if (mode == nullptr) {
        diags_.Emit(Brace(v), JsonMissingField, what, "`mode` (`context_parallel` or `local`)");
        rule.has_error = true;
      } else if (Expect(mode->value, Type::kString, "mode", "a string")) {
        rule.mode_range = At(mode->value);
        if (mode->value.text == "local") {
          rule.mode = AttentionMode::kLocal;
        } else if (mode->value.text == "context_parallel") {
          rule.mode = AttentionMode::kContextParallel;
        } else {
          diags_.Emit(At(mode->value), UnknownAttentionMode, mode->value.text,
                      SuggestionSuffix(mode->value.text, {"context_parallel", "local"}));
          rule.has_error = true;
        }
      } else {
        rule.has_error = true;
      }
    } else {
      if (const JsonMember* mode = fields.Get("mode")) {
        diags_.Emit(KeyAt(*mode), JsonUnknownField, "mode", what, "; expected `items`");
        rule.has_error = true;
      }
      const JsonMember* items = fields.Get("items");
      if (items == nullptr) {
        diags_.Emit(Brace(v), JsonMissingField, what, "`items`");
        rule.has_error = true;
      } else if (Expect(items->value, Type::kArray, "items", "an array of tensors")) {
        for (const JsonValue& item : items->value.elements) {
          ShardItem parsed = ReadItem(item, rule.kind);
          rule.has_error |= parsed.has_error;
          rule.items.push_back(std::move(parsed));
        }
      } else {
        rule.has_error = true;
      }
    }
    rules.push_back(std::move(rule));
  }

  ShardItem ReadItem(const JsonValue& v, CpRuleKind kind) {
    ShardItem item;
    item.range = At(v);
    if (!Expect(v, Type::kObject, "items", "a tensor object")) {
      item.has_error = true;
      return item;
    }
    Fields fields = Collect(v, "", "a tensor",
                            {"argument", "element", "output", "dim", "rank", "optional",
                             "comments", "comment"});
    ReadComments(fields, item.comments);
    const JsonMember* argument = fields.Get("argument");
    const JsonMember* output = fields.Get("output");
    const JsonMember* element = fields.Get("element");
    if (argument && output) {
      diags_.Emit(KeyAt(*output), JsonAmbiguousRule, "a tensor", "argument", "output");
      item.has_error = true;
    } else if (argument) {
      item.target.kind = element ? TargetKind::kArgumentElement : TargetKind::kArgument;
      item.target.range = At(argument->value);
      if (Expect(argument->value, Type::kString, "argument", "a string") &&
          IsIdentifier(argument->value.text)) {
        item.target.argument = Name{argument->value.text, At(argument->value)};
      } else {
        if (argument->value.type == Type::kString) {
          diags_.Emit(At(argument->value), JsonWrongType, "argument", "`" + argument->value.text + "`",
                      "an argument name (letters, digits and `_`, not a keyword)");
        }
        item.has_error = true;
      }
      if (element) {
        if (auto index = ReadInt(*element)) item.target.index = *index; else item.has_error = true;
      }
    } else if (output) {
      item.target.kind = TargetKind::kOutput;
      item.target.range = At(output->value);
      if (element) {
        diags_.Emit(KeyAt(*element), JsonUnknownField, "element", "an output tensor",
                    "; `element` selects from a tuple argument");
        item.has_error = true;
      }
      if (auto index = ReadInt(*output)) item.target.index = *index; else item.has_error = true;
    } else {
      diags_.Emit(Brace(v), JsonMissingField, "a tensor", "`argument` or `output`");
      item.has_error = true;
      return item;
    }
    if (const JsonMember* dim = fields.Get("dim")) {
      if (auto value = ReadInt(*dim)) item.dim = *value; else item.has_error = true;
    } else if (!item.has_error && kind != CpRuleKind::kCalls) {
      diags_.Emit(Brace(v), MissingDim, DescribeTarget(item.target),
                  kind == CpRuleKind::kGather ? "gather along" : "split along");
      item.has_error = true;
    }
    if (const JsonMember* rank = fields.Get("rank")) {
      if (auto value = ReadInt(*rank)) item.rank = *value; else item.has_error = true;
    }
    if (const JsonMember* optional = fields.Get("optional")) {
      if (Expect(optional->value, Type::kBool, "optional", "`true` or `false`")) {
        if (optional->value.boolean) item.optional = At(optional->value);
      } else {
        item.has_error = true;
      }
    }
    return item;
  }

  // ---- tensor_parallel -------------------------------------------------------------------
  void ReadTp(const JsonMember& section, PlanAst& plan) {
    if (!Expect(section.value, Type::kObject, section.key, "an object")) return;
    TensorParallelSection tp;
    tp.range = KeyAt(section);
    Fields fields = Collect(section.value, "", "`tensor_parallel`",
                            {"comments", "comment", "rules", "end_comments"});
    ReadComments(fields, tp.comments);
    ReadStrings(fields.Get("end_comments"), tp.end_comments);
    if (const JsonMember* rules = fields.Get("rules")) {
      if (Expect(rules->value, Type::kArray, "rules", "an array of rules")) {
        for (const JsonValue& rule : rules->value.elements) ReadTpRule(rule, tp.rules);
      }
    }
    plan.tensor_parallel = std::move(tp);
  }

  void ReadTpRule(const JsonValue& v, std::vector<TpRule>& rules) {
    if (!Expect(v, Type::kObject, "rules", "a rule object")) return;
    TpRule rule;
    rule.range = At(v);
    Fields fields = Collect(v, "", "a tensor-parallel rule",
                            {"colwise", "rowwise", "replicate", "packed", "optional", "comments", "comment"});
    ReadComments(fields, rule.comments);
    const JsonMember* style = OneOf(fields, v, "a tensor-parallel rule", {"colwise", "rowwise", "replicate"});
    if (style == nullptr) {
      rule.has_error = true;
      rules.push_back(std::move(rule));
      return;
    }
    rule.style_range = KeyAt(*style);
    rule.style = style->key == "colwise" ? TpStyle::kColwise
                 : style->key == "rowwise" ? TpStyle::kRowwise
                                           : TpStyle::kReplicate;
    if (auto pattern = ReadPattern(*style)) rule.pattern = *pattern; else rule.has_error = true;
    if (const JsonMember* packed = fields.Get("packed")) {
      Packed blocks;
      blocks.range = At(packed->value);
      if (Expect(packed->value, Type::kArray, "packed", "an array of block sizes")) {
        for (const JsonValue& e : packed->value.elements) {
          BlockSize size;
          size.range = At(e);
          if (e.type == Type::kString && IsIdentifier(e.text)) {
            size.is_name = true;
            size.name = e.text;
          } else if (e.type == Type::kNumber && e.is_integer && e.integer >= 0) {
            if (e.integer > kMaxInteger) {
              diags_.Emit(At(e), IntegerTooLarge, e.text, kMaxInteger);
              rule.has_error = true;
              continue;
            }
            size.value = e.integer;
          } else {
            diags_.Emit(At(e), JsonWrongType, "packed", e.type == Type::kString ? "`" + e.text + "`" : JsonTypeName(e.type),
                        "a block size: a non-negative integer or a config name (not a keyword)");
            rule.has_error = true;
            continue;
          }
          blocks.blocks.push_back(std::move(size));
        }
        rule.packed = std::move(blocks);
      } else {
        rule.has_error = true;
      }
    }
    if (const JsonMember* optional = fields.Get("optional")) {
      if (Expect(optional->value, Type::kBool, "optional", "`true` or `false`")) {
        if (optional->value.boolean) rule.optional = At(optional->value);
      } else {
        rule.has_error = true;
      }
    }
    rules.push_back(std::move(rule));
  }

  const source::SourceBuffer& src_;
  diag::Emitter& diags_;
  uint32_t errors_before_ = diags_.error_count();
};

}  // namespace

std::optional<PlanAst> ReadJsonPlan(const source::SourceBuffer& src, diag::Emitter& diags) {
  return JsonPlanReader(src, diags).Read();
}

}  // namespace weft::syntax
