// ParseDsl: ANTLR lexer + parser (grammar/WeftPlan.g4) with weft's error listener, then a
// walk over the parse tree that builds the PlanAst and reports the targeted diagnostics
// the grammar's error alternatives make possible.
#include <antlr4-runtime.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "WeftPlanLexer.h"
#include "WeftPlanParser.h"
#include "compiler/syntax/parse.h"
#include "compiler/syntax/pattern_check.h"
#include "compiler/syntax/spelling.h"
#include "compiler/syntax/structure_check.h"
#include "compiler/syntax/utf8.h"

namespace weft::syntax {
namespace {

using weftgrammar::WeftPlanLexer;
using weftgrammar::WeftPlanParser;
using P = WeftPlanParser;

WEFT_DIAGNOSTIC(InvalidCharacter, Error, "{0} in plan text{1}", std::string, std::string);
WEFT_DIAGNOSTIC(UnterminatedString, Error,
                "pattern string has no closing quote; add `\"` at the end of the pattern", );
WEFT_DIAGNOSTIC(UnexpectedToken, Error, "unexpected {0}{1}", std::string, std::string);
WEFT_DIAGNOSTIC(MisspelledKeyword, Error, "unknown keyword `{0}`; did you mean `{1}`?",
                std::string, std::string);
WEFT_DIAGNOSTIC(UnexpectedEquals, Error, "unexpected `=`{0}", std::string);
WEFT_DIAGNOSTIC(UnknownSection, Error, "unknown section `{0}`{1}", std::string, std::string);
WEFT_DIAGNOSTIC(UnknownStatement, Error, "unknown statement `{0}` in `{1}`{2}", std::string, std::string,
                std::string);
WEFT_DIAGNOSTIC(AttentionInGuidance, Error,
                "`attention` rules belong in `context_parallel`; `guidance_parallel` splits and gathers the "
                "batch of guidance branches, which attention never mixes", );
WEFT_DIAGNOSTIC(UnknownField, Error, "unknown field `{0}`{1}", std::string, std::string);

const std::vector<std::string> kSections = {"context_parallel", "tensor_parallel", "guidance_parallel"};
const std::vector<std::string> kCpStatements = {"split", "gather", "attention", "calls"};
const std::vector<std::string> kTpStyles = {"colwise", "rowwise", "replicate"};
const std::vector<std::string> kFields = {"dim", "rank", "optional"};
const std::vector<std::string> kModes = {"context_parallel", "local"};

bool IsReal(const antlr4::Token* token) {
  return token != nullptr && token->getStartIndex() != INVALID_INDEX &&
         token->getTokenIndex() != INVALID_INDEX;
}

// Maps ANTLR's code-point indexes to byte offsets (identity for ASCII text).
class OffsetMap {
 public:
  explicit OffsetMap(const std::string& text) {
    bool ascii = true;
    for (unsigned char c : text) ascii &= c < 0x80;
    if (ascii) return;
    for (uint32_t i = 0; i < text.size(); ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) byte_of_.push_back(i);
    }
    byte_of_.push_back(static_cast<uint32_t>(text.size()));
  }
  uint32_t ByteOf(size_t index) const {
    if (byte_of_.empty()) return static_cast<uint32_t>(index);
    return index < byte_of_.size() ? byte_of_[index] : byte_of_.back();
  }

 private:
  std::vector<uint32_t> byte_of_;
};

// Replaces every byte that is not part of valid UTF-8 (ANTLR's decoder rejects
// such input) by a blank, reporting the first one. Returns the text ANTLR should see.
std::string SanitizeUtf8(const source::SourceBuffer& src, diag::Emitter& diags) {
  std::string text = src.text();
  bool reported = false;
  size_t i = 0;
  while (i < text.size()) {
    size_t length = Utf8SequenceLength(text, i);
    bool ok = length > 0;
    if (ok) {
      i += length;
      continue;
    }
    if (!reported) {
      diags.Emit(src.RangeAt(src.id(), static_cast<uint32_t>(i), 1), InvalidCharacter,
                 "byte that is not UTF-8", "; plans are UTF-8 text");
      reported = true;
    }
    text[i] = ' ';  // reported once above; a blank keeps offsets and adds no error
    ++i;
  }
  return text;
}

std::string Describe(const antlr4::Token* token) {
  if (token == nullptr || token->getType() == antlr4::Token::EOF) return "end of file";
  std::string text = token->getText();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return "`" + text + "`";
}

// Reports ANTLR's syntax errors as diagnostics (never to the console, never by throwing).
class ErrorListener : public antlr4::BaseErrorListener {
 public:
  ErrorListener(const source::SourceBuffer& src, const OffsetMap& offsets, diag::Emitter& diags)
      : src_(src), offsets_(offsets), diags_(diags) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t /*line*/,
                   size_t /*col*/, const std::string& /*msg*/, std::exception_ptr /*e*/) override {
    ++count_;
    source::SourceRange at = RangeOf(offending);
    if (reported_any_ && at.offset == last_offset_) return;  // one error per position
    reported_any_ = true;
    last_offset_ = at.offset;
    reported_offsets_.insert(at.offset);

    std::vector<std::string> expected_keywords;
    std::vector<std::string> expected;
    if (auto* parser = dynamic_cast<antlr4::Parser*>(recognizer)) {
      antlr4::misc::IntervalSet set;
      try {
        set = parser->getExpectedTokens();
      } catch (...) {
      }
      std::vector<std::string> kinds;
      for (ssize_t type : set.toList()) {
        if (type == static_cast<ssize_t>(antlr4::Token::EOF)) {
          kinds.push_back("end of file");
          continue;
        }
        switch (type) {
          case P::IDENT:
            kinds.push_back("a name");
            break;
          case P::INT:
            kinds.push_back("an integer");
            break;
          case P::STRING:
            kinds.push_back("a pattern string");
            break;
          case P::UNTERMINATED_STRING:
          case P::EQ:
            break;
          default: {
            std::string literal = parser->getVocabulary().getLiteralName(type);
            if (literal.size() >= 2) literal = literal.substr(1, literal.size() - 2);
            if (!literal.empty()) {
              expected.push_back("`" + literal + "`");
              if (std::isalpha(static_cast<unsigned char>(literal[0]))) {
                expected_keywords.push_back(literal);
              }
            }
          }
        }
      }
      // Where a section, statement or style keyword (or the header's `for`) is expected, a
      // name is accepted only by an error alternative that diagnoses misspellings; listing
      // it would mislead. (Where a tensor is expected, a name is a real choice.)
      static const std::set<std::string> kStarters = {
          "context_parallel", "tensor_parallel", "guidance_parallel", "split", "gather", "attention",
          "colwise", "rowwise", "replicate", "for"};
      bool starters = false;
      for (const std::string& keyword : expected_keywords) starters |= kStarters.count(keyword) > 0;
      if (starters) kinds.erase(std::remove(kinds.begin(), kinds.end(), "a name"), kinds.end());
      expected.insert(expected.end(), kinds.begin(), kinds.end());
    }
    std::string hint;
    if (expected.size() > 6 && std::count(expected_keywords.begin(), expected_keywords.end(), "local")) {
      // Any word is accepted as an attention mode (and checked later): name the real ones.
      expected = {"`context_parallel`", "`local`"};
    }
    if (!expected.empty() && expected.size() <= 6) {
      hint = "; expected ";
      for (size_t i = 0; i < expected.size(); ++i) {
        if (i > 0) hint += i + 1 == expected.size() ? " or " : ", ";
        hint += expected[i];
      }
    }
    const size_t type = offending ? offending->getType() : antlr4::Token::EOF;
    if (type == static_cast<size_t>(P::IDENT)) {
      if (auto match = ClosestMatch(offending->getText(), expected_keywords)) {
        diags_.Emit(at, MisspelledKeyword, offending->getText(), *match);
        return;
      }
    }
    if (type == static_cast<size_t>(P::EQ)) {
      diags_.Emit(at, UnexpectedEquals, hint);
      return;
    }
    if (type == static_cast<size_t>(P::UNTERMINATED_STRING)) {
      diags_.Emit(at, UnterminatedString);
      return;
    }
    diags_.Emit(at, UnexpectedToken, Describe(offending), hint);
  }

  source::SourceRange RangeOf(const antlr4::Token* token) const {
    if (token == nullptr || token->getType() == antlr4::Token::EOF || !IsReal(token)) {
      // End of file: point just past the last non-blank character.
      uint32_t end = src_.size();
      while (end > 0 && std::isspace(static_cast<unsigned char>(src_.text()[end - 1]))) --end;
      if (token && IsReal(token) && token->getType() != antlr4::Token::EOF) {
        end = offsets_.ByteOf(token->getStartIndex());
      }
      return src_.RangeAt(src_.id(), end, 0);
    }
    uint32_t begin = offsets_.ByteOf(token->getStartIndex());
    uint32_t end = offsets_.ByteOf(token->getStopIndex() + 1);
    return src_.RangeAt(src_.id(), begin, end > begin ? end - begin : 0);
  }

  size_t count() const { return count_; }
  // Byte offsets where a syntax error was reported (the AST builder does not report a
  // second error at the same place).
  const std::set<uint32_t>& reported_offsets() const { return reported_offsets_; }

 private:
  std::set<uint32_t> reported_offsets_;
  const source::SourceBuffer& src_;
  const OffsetMap& offsets_;
  diag::Emitter& diags_;
  size_t count_ = 0;
  bool reported_any_ = false;
  uint32_t last_offset_ = 0;
};

struct CommentToken {
  uint32_t offset;
  uint32_t line;
  bool trailing;  // code precedes it on its line
  std::string text;
};

class AstBuilder {
 public:
  AstBuilder(const source::SourceBuffer& src, const OffsetMap& offsets, diag::Emitter& diags,
             std::vector<CommentToken> comments, const std::set<uint32_t>& syntax_errors)
      : src_(src), offsets_(offsets), diags_(diags), comments_(std::move(comments)),
        syntax_errors_(syntax_errors) {}

  std::optional<PlanAst> Build(P::PlanContext* ctx, bool syntax_errors) {
    PlanAst plan;
    plan.file = src_.id();
    plan.has_error = syntax_errors;
    bool header_ok = false;
    if (auto* header = ctx->header()) {
      plan.header_range = Range(header);
      TakeComments(plan.header_range.offset, &plan.comments.leading);
      if (IsReal(header->badFor)) {
        std::string word = Text(header->badFor);
        if (auto match = ClosestMatch(word, {"for"})) {
          diags_.Emit(Range(header->badFor), MisspelledKeyword, word, *match);
        } else {
          diags_.Emit(Range(header->badFor), UnexpectedToken, "`" + word + "`",
                      "; the header is `plan <name> for <ModelClass>`");
        }
        plan.has_error = true;
      }
      if (IsReal(header->name) && IsReal(header->model)) {
        plan.name = NameOf(header->name);
        plan.model = NameOf(header->model);
        header_ok = true;
      }
      SetLast(&plan.comments, header->getStop());
    }
    for (P::SectionContext* section : ctx->section()) BuildSection(section, plan);
    TakeComments(src_.size() + 1, &plan.end_comments);
    CheckStructure(plan, diags_);
    if (!header_ok) return std::nullopt;
    return plan;
  }

 private:
  // ---- ranges, names, numbers -------------------------------------------------------------
  source::SourceRange Range(const antlr4::Token* token) const {
    if (!IsReal(token) || token->getType() == antlr4::Token::EOF) {
      return src_.RangeAt(src_.id(), src_.size(), 0);
    }
    uint32_t begin = offsets_.ByteOf(token->getStartIndex());
    uint32_t end = offsets_.ByteOf(token->getStopIndex() + 1);
    return src_.RangeAt(src_.id(), begin, end > begin ? end - begin : 0);
  }
  source::SourceRange Range(antlr4::tree::TerminalNode* node) const {
    return Range(node ? node->getSymbol() : nullptr);
  }
  source::SourceRange Range(antlr4::ParserRuleContext* ctx) const {
    source::SourceRange first = Range(ctx->getStart());
    antlr4::Token* stop = ctx->getStop();
    if (IsReal(stop) && stop->getType() != antlr4::Token::EOF &&
        stop->getStopIndex() + 1 > ctx->getStart()->getStartIndex()) {
      return source::Cover(first, Range(stop));
    }
    return first;
  }
  // The token's text, sliced from the source (ANTLR's getText re-encodes it each call).
  std::string Text(const antlr4::Token* token) const {
    if (!IsReal(token)) return "";
    source::SourceRange r = Range(token);
    return src_.text().substr(r.offset, r.length);
  }
  std::string Text(antlr4::tree::TerminalNode* node) const { return Text(node ? node->getSymbol() : nullptr); }
  std::string Text(antlr4::ParserRuleContext* ctx) const {
    source::SourceRange r = Range(ctx);
    return src_.text().substr(r.offset, r.length);
  }
  Name NameOf(const antlr4::Token* token) const { return Name{Text(token), Range(token)}; }

  bool Broken(antlr4::ParserRuleContext* ctx) const {
    if (ctx == nullptr || ctx->exception != nullptr) return true;
    for (antlr4::tree::ParseTree* child : ctx->children) {
      if (antlr4::tree::TerminalNode* t = dynamic_cast<antlr4::tree::TerminalNode*>(child)) {
        if (dynamic_cast<antlr4::tree::ErrorNode*>(child) != nullptr || !IsReal(t->getSymbol())) {
          return true;
        }
      }
    }
    return false;
  }

  std::optional<IntLit> Int(const antlr4::Token* token) {
    if (!IsReal(token) || token->getType() != P::INT) return std::nullopt;
    std::string text = Text(token);
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || value > kMaxInteger) {
      diags_.Emit(Range(token), IntegerTooLarge, text, kMaxInteger);
      return std::nullopt;
    }
    return IntLit{value, Range(token)};
  }

  void ReportEquals(antlr4::tree::TerminalNode* eq, const std::string& keyword,
                    const antlr4::Token* value) {
    if (eq == nullptr) return;
    std::string example = keyword + (IsReal(value) ? " " + Text(value) : "");
    diags_.Emit(Range(eq), UnexpectedEquals, "; write `" + example + "`, without `=`");
  }

  // True when `word` is on the line of the previous unknown statement: the rest of a
  // statement that was already reported (`splt "" hidden_states dim 1`), not a new one.
  bool ContinuesUnknown(const antlr4::Token* word) {
    if (syntax_errors_.count(Range(word).offset)) return true;  // already reported there
    uint32_t line = Range(word).line;
    bool continues = line == last_unknown_line_;
    last_unknown_line_ = line;
    return continues;
  }

  // ---- comments --------------------------------------------------------------------------
  // Hands the comments that start before `offset` to their owners: a comment that shares a
  // line with code goes to the node last set by SetLast (if it ended on that line and has
  // no trailing comment yet); the others lead the next node, `leading`.
  void TakeComments(uint32_t offset, std::vector<std::string>* leading) {
    while (next_comment_ < comments_.size() && comments_[next_comment_].offset < offset) {
      CommentToken& c = comments_[next_comment_++];
      if (c.trailing && last_ != nullptr && c.line == last_line_ && !last_->trailing) {
        last_->trailing = c.text;
      } else if (leading != nullptr) {
        leading->push_back(c.text);
      }
    }
  }
  void SetLast(Comments* comments, const antlr4::Token* last_token) {
    last_ = comments;
    last_line_ = IsReal(last_token) ? Range(last_token).line : 0;
  }

  // ---- sections --------------------------------------------------------------------------
  void BuildSection(P::SectionContext* section, PlanAst& plan) {
    if (auto* cp = dynamic_cast<P::ContextParallelSectionContext*>(section)) {
      BuildSplitSection(cp, cp->CONTEXT_PARALLEL(), cp->LBRACE(), cp->RBRACE(), cp->cpStatement(),
                        "context_parallel", plan.context_parallel, plan);
    } else if (auto* g = dynamic_cast<P::GuidanceParallelSectionContext*>(section)) {
      BuildSplitSection(g, g->GUIDANCE_PARALLEL(), g->LBRACE(), g->RBRACE(), g->cpStatement(), "guidance_parallel",
                        plan.guidance_parallel, plan);
    } else if (auto* tp = dynamic_cast<P::TensorParallelSectionContext*>(section)) {
      TensorParallelSection fresh;
      fresh.range = Range(tp->TENSOR_PARALLEL());
      TakeComments(fresh.range.offset, &fresh.comments.leading);
      bool duplicate = plan.tensor_parallel.has_value();
      if (duplicate) {
        diags_.Build(fresh.range, DuplicateSection, "tensor_parallel")
            .Note(plan.tensor_parallel->range, PreviousSection, "tensor_parallel")
            .Emit();
        plan.has_error = true;
      } else {
        plan.tensor_parallel = std::move(fresh);
      }
      TensorParallelSection& target = duplicate ? fresh : *plan.tensor_parallel;
      SetLast(&target.comments, tp->LBRACE() ? tp->LBRACE()->getSymbol() : nullptr);
      std::vector<P::TpStatementContext*> statements = tp->tpStatement();
      target.rules.reserve(statements.size());
      for (P::TpStatementContext* statement : statements) {
        BuildTpStatement(statement, target.rules, plan);
      }
      TakeComments(tp->RBRACE() ? Range(tp->RBRACE()).offset : src_.size() + 1,
                   &target.end_comments);
      SetLast(nullptr, nullptr);
      if (Broken(tp)) plan.has_error = true;
      if (duplicate) {
        for (TpRule& rule : fresh.rules) plan.tensor_parallel->rules.push_back(std::move(rule));
      }
    } else if (auto* unknown = dynamic_cast<P::UnknownSectionContext*>(section)) {
      if (IsReal(unknown->unknown) && !syntax_errors_.count(Range(unknown->unknown).offset)) {
        std::string word = Text(unknown->unknown);
        diags_.Emit(Range(unknown->unknown), UnknownSection, word,
                    SuggestionSuffix(word, kSections));
      }
      plan.has_error = true;
      std::vector<std::string> dropped;
      TakeComments(unknown->getStop() ? Range(unknown->getStop()).offset : src_.size() + 1,
                   &dropped);
    } else {
      plan.has_error = true;
    }
  }

  // A section of split/gather rules: context_parallel, or guidance_parallel (no attention rules).
  void BuildSplitSection(antlr4::ParserRuleContext* ctx, antlr4::tree::TerminalNode* keyword,
                         antlr4::tree::TerminalNode* lbrace, antlr4::tree::TerminalNode* rbrace,
                         const std::vector<P::CpStatementContext*>& statements, const char* name,
                         std::optional<ContextParallelSection>& slot, PlanAst& plan) {
    ContextParallelSection fresh;
    fresh.range = Range(keyword);
    TakeComments(fresh.range.offset, &fresh.comments.leading);
    const bool duplicate = slot.has_value();
    if (duplicate) {
      diags_.Build(fresh.range, DuplicateSection, name).Note(slot->range, PreviousSection, name).Emit();
      plan.has_error = true;
    } else {
      slot = std::move(fresh);
    }
    ContextParallelSection& target = duplicate ? fresh : *slot;
    SetLast(&target.comments, lbrace ? lbrace->getSymbol() : nullptr);
    target.rules.reserve(statements.size());
    section_name_ = name;
    for (P::CpStatementContext* statement : statements) BuildCpStatement(statement, target.rules, plan);
    TakeComments(rbrace ? Range(rbrace).offset : src_.size() + 1, &target.end_comments);
    SetLast(nullptr, nullptr);
    if (Broken(ctx)) plan.has_error = true;
    if (duplicate) {
      // Keep its rules (they were diagnosed); a binder sees one section.
      for (CpRule& rule : fresh.rules) slot->rules.push_back(std::move(rule));
    }
  }

  // ---- context_parallel ------------------------------------------------------------------
  std::optional<Pattern> BuildPattern(P::PatternContext* ctx) {
    if (ctx == nullptr) return std::nullopt;
    if (ctx->UNTERMINATED_STRING() != nullptr) {
      diags_.Emit(Range(ctx->UNTERMINATED_STRING()), UnterminatedString);
      return std::nullopt;
    }
    if (antlr4::tree::TerminalNode* quoted = ctx->SINGLE_QUOTED()) {
      diags_.Emit(src_.RangeAt(src_.id(), Range(quoted).offset, 1), InvalidCharacter, "character `'`", "; patterns are written in double quotes");
      return std::nullopt;
    }
    antlr4::tree::TerminalNode* string = ctx->STRING();
    if (string == nullptr || !IsReal(string->getSymbol())) return std::nullopt;
    std::string text = Text(string);
    Pattern pattern{text.substr(1, text.size() - 2), Range(string)};
    if (!CheckPattern(pattern.text, src_, pattern.range, true, pattern.range.offset + 1, diags_)) {
      return std::nullopt;
    }
    return pattern;
  }

  void BuildCpStatement(P::CpStatementContext* statement, std::vector<CpRule>& rules,
                        PlanAst& plan) {
    CpRule rule;
    rule.range = Range(statement);
    TakeComments(rule.range.offset, &rule.comments.leading);
    rule.has_error = Broken(statement);
    if (auto* unknown = dynamic_cast<P::UnknownCpStatementContext*>(statement)) {
      if (IsReal(unknown->unknown) && !ContinuesUnknown(unknown->unknown)) {
        std::string word = Text(unknown->unknown);
        diags_.Emit(Range(unknown->unknown), UnknownStatement, word, section_name_,
                    SuggestionSuffix(word, kCpStatements));
      }
      plan.has_error = true;
      std::vector<std::string> dropped;
      TakeComments(rule.range.end(), &dropped);
      return;
    }
    P::PatternContext* pattern_ctx = nullptr;
    P::ShardBodyContext* body = nullptr;
    if (auto* split = dynamic_cast<P::SplitStatementContext*>(statement)) {
      rule.kind = CpRuleKind::kSplit;
      rule.keyword_range = Range(split->SPLIT());
      pattern_ctx = split->pattern();
      body = split->shardBody();
    } else if (auto* gather = dynamic_cast<P::GatherStatementContext*>(statement)) {
      rule.kind = CpRuleKind::kGather;
      rule.keyword_range = Range(gather->GATHER());
      pattern_ctx = gather->pattern();
      body = gather->shardBody();
    } else if (auto* attention = dynamic_cast<P::AttentionStatementContext*>(statement)) {
      rule.kind = CpRuleKind::kAttention;
      if (section_name_ == std::string("guidance_parallel")) {
        diags_.Emit(Range(attention->ATTENTION()), AttentionInGuidance);
        rule.has_error = true;
        plan.has_error = true;
      }
      rule.keyword_range = Range(attention->ATTENTION());
      pattern_ctx = attention->pattern();
      if (attention->attnMode != nullptr && !Broken(attention->attnMode)) {
        std::string word = Text(attention->attnMode);
        rule.mode_range = Range(attention->attnMode);
        if (word == "local") {
          rule.mode = AttentionMode::kLocal;
        } else if (word == "context_parallel") {
          rule.mode = AttentionMode::kContextParallel;
        } else {
          diags_.Emit(rule.mode_range, UnknownAttentionMode, word, SuggestionSuffix(word, kModes));
          rule.has_error = true;
        }
      } else {
        rule.has_error = true;
      }
    } else if (auto* calls = dynamic_cast<P::CallsStatementContext*>(statement)) {
      // Where it may stand and what it may list: structure_check.cpp, for both surface forms.
      rule.kind = CpRuleKind::kCalls;
      rule.keyword_range = Range(calls->CALLS());
      pattern_ctx = calls->pattern();
      body = calls->shardBody();
    } else {
      plan.has_error = true;
      return;
    }
    if (auto pattern = BuildPattern(pattern_ctx)) {
      rule.pattern = std::move(*pattern);
    } else {
      rule.has_error = true;
    }
    rules.push_back(std::move(rule));
    CpRule& placed = rules.back();
    SetLast(&placed.comments, placed.kind == CpRuleKind::kAttention
                                  ? statement->getStop()
                                  : (pattern_ctx ? pattern_ctx->getStop() : nullptr));
    if (body != nullptr) {
      if (body->LBRACE() != nullptr) SetLast(&placed.comments, body->LBRACE()->getSymbol());
      std::vector<P::ShardItemContext*> items = body->shardItem();
      placed.items.reserve(items.size());
      for (P::ShardItemContext* item : items) BuildItem(item, placed);
      if (body->RBRACE() != nullptr) {
        TakeComments(Range(body->RBRACE()).offset, &placed.end_comments);
        SetLast(&placed.comments, body->RBRACE()->getSymbol());
      } else if (body->LBRACE() == nullptr) {
        SetLast(&placed.comments, statement->getStop());
      }
      if (Broken(body)) placed.has_error = true;
    }
    for (const ShardItem& item : placed.items) placed.has_error |= item.has_error;
    plan.has_error |= placed.has_error;
  }

  void BuildItem(P::ShardItemContext* ctx, CpRule& rule) {
    ShardItem item;
    item.range = Range(ctx);
    TakeComments(item.range.offset, &item.comments.leading);
    item.has_error = Broken(ctx);
    P::TargetContext* target = ctx->target();
    if (target == nullptr || Broken(target)) {
      item.has_error = true;
    } else if (auto* output = dynamic_cast<P::OutputTargetContext*>(target)) {
      item.target.kind = TargetKind::kOutput;
      ReportEquals(output->EQ(), "output", output->index);
      if (auto index = Int(output->index)) item.target.index = *index; else item.has_error = true;
    } else if (auto* misspelled = dynamic_cast<P::MisspelledOutputTargetContext*>(target)) {
      // `outptu 0`: a name followed by an index can only have meant `output N`.
      std::string word = Text(misspelled->badOutput);
      if (auto match = ClosestMatch(word, {"output"})) {
        diags_.Emit(Range(misspelled->badOutput), MisspelledKeyword, word, *match);
      } else {
        diags_.Emit(Range(misspelled->badOutput), UnexpectedToken, "`" + word + " " +
                    Text(misspelled->index) + "`",
                    "; a tensor is an argument name, `name[i]` or `output i`");
      }
      item.target.kind = TargetKind::kOutput;
      if (auto index = Int(misspelled->index)) item.target.index = *index;
      item.has_error = true;
    } else if (auto* element = dynamic_cast<P::ElementTargetContext*>(target)) {
      item.target.kind = TargetKind::kArgumentElement;
      item.target.argument = NameOf(element->arg);
      if (auto index = Int(element->index)) item.target.index = *index; else item.has_error = true;
    } else if (auto* argument = dynamic_cast<P::ArgumentTargetContext*>(target)) {
      item.target.kind = TargetKind::kArgument;
      item.target.argument = NameOf(argument->arg);
    }
    if (target != nullptr) item.target.range = Range(target);
    if (ctx->EQ() != nullptr) {
      std::string example = target ? Text(target) + " dim 1" : "dim 1";
      diags_.Emit(Range(ctx->EQ()), UnexpectedEquals,
                  "; fields follow the tensor directly, as in `" + example + "`");
      item.has_error = true;
    }
    std::vector<P::FieldContext*> fields = ctx->field();
    // A lone word that looks like a field keyword is a misspelled field of the previous
    // item (`rank 3 optionl`), not a tensor of its own.
    if (fields.empty() && item.target.kind == TargetKind::kArgument && !item.has_error) {
      if (auto match = ClosestMatch(item.target.argument.text, kFields)) {
        diags_.Emit(item.target.argument.range, UnknownField, item.target.argument.text,
                    "; did you mean `" + *match + "`?");
        rule.has_error = true;
        return;
      }
    }
    std::optional<source::SourceRange> dim_at, rank_at;
    for (P::FieldContext* field : fields) {
      if (Broken(field)) {
        item.has_error = true;
        continue;
      }
      if (auto* dim = dynamic_cast<P::DimFieldContext*>(field)) {
        ReportEquals(dim->EQ(), "dim", dim->value);
        if (dim->EQ()) item.has_error = true;
        if (dim_at) {
          diags_.Build(Range(dim->DIM()), DuplicateField, "dim").Note(*dim_at, PreviousField, "dim").Emit();
          item.has_error = true;
          continue;
        }
        dim_at = Range(dim->DIM());
        if (auto value = Int(dim->value)) item.dim = *value; else item.has_error = true;
      } else if (auto* rank = dynamic_cast<P::RankFieldContext*>(field)) {
        ReportEquals(rank->EQ(), "rank", rank->value);
        if (rank->EQ()) item.has_error = true;
        if (rank_at) {
          diags_.Build(Range(rank->RANK()), DuplicateField, "rank").Note(*rank_at, PreviousField, "rank").Emit();
          item.has_error = true;
          continue;
        }
        rank_at = Range(rank->RANK());
        if (auto value = Int(rank->value)) item.rank = *value; else item.has_error = true;
      } else if (auto* optional = dynamic_cast<P::OptionalFieldContext*>(field)) {
        if (item.optional) {
          diags_.Build(Range(optional->OPTIONAL()), DuplicateField, "optional")
              .Note(*item.optional, PreviousField, "optional")
              .Emit();
          item.has_error = true;
          continue;
        }
        item.optional = Range(optional->OPTIONAL());
      } else if (auto* unknown = dynamic_cast<P::UnknownFieldContext*>(field)) {
        std::string word = Text(unknown->unknown);
        diags_.Emit(Range(unknown->unknown), UnknownField, word, SuggestionSuffix(word, kFields));
        item.has_error = true;
      }
    }
    if (!dim_at && !item.has_error && rule.kind != CpRuleKind::kCalls) {
      diags_.Emit(item.target.range, MissingDim, DescribeTarget(item.target),
                  rule.kind == CpRuleKind::kGather ? "gather along" : "split along");
      item.has_error = true;
    }
    rule.items.push_back(std::move(item));
    SetLast(&rule.items.back().comments, ctx->getStop());
  }

  // ---- tensor_parallel -------------------------------------------------------------------
  void BuildTpStatement(P::TpStatementContext* statement, std::vector<TpRule>& rules,
                        PlanAst& plan) {
    TpRule rule;
    rule.range = Range(statement);
    TakeComments(rule.range.offset, &rule.comments.leading);
    rule.has_error = Broken(statement);
    if (auto* unknown = dynamic_cast<P::UnknownTpStatementContext*>(statement)) {
      if (IsReal(unknown->unknown) && !ContinuesUnknown(unknown->unknown)) {
        std::string word = Text(unknown->unknown);
        diags_.Emit(Range(unknown->unknown), UnknownStyle, word, SuggestionSuffix(word, kTpStyles));
      }
      plan.has_error = true;
      std::vector<std::string> dropped;
      TakeComments(rule.range.end(), &dropped);
      return;
    }
    auto* style = dynamic_cast<P::StyleStatementContext*>(statement);
    if (style == nullptr || !IsReal(style->style)) {
      plan.has_error = true;
      return;
    }
    rule.style_range = Range(style->style);
    switch (style->style->getType()) {
      case P::ROWWISE:
        rule.style = TpStyle::kRowwise;
        break;
      case P::REPLICATE:
        rule.style = TpStyle::kReplicate;
        break;
      default:
        rule.style = TpStyle::kColwise;
    }
    if (auto pattern = BuildPattern(style->pattern())) {
      rule.pattern = std::move(*pattern);
    } else {
      rule.has_error = true;
    }
    if (P::PackedContext* packed = style->packed()) {
      Packed blocks;
      blocks.range = Range(packed);
      if (packed->EQ()) {
        diags_.Emit(Range(packed->EQ()), UnexpectedEquals, "; write `packed [a, b]`, without `=`");
        rule.has_error = true;
      }
      for (P::BlockSizeContext* block : packed->blockSize()) {
        BlockSize size;
        size.range = Range(block);
        if (block->IDENT() != nullptr && IsReal(block->IDENT()->getSymbol())) {
          size.is_name = true;
          size.name = Text(block->IDENT());
        } else if (auto value = Int(block->INT() ? block->INT()->getSymbol() : nullptr)) {
          size.value = value->value;
        } else {
          rule.has_error = true;
          continue;
        }
        blocks.blocks.push_back(std::move(size));
      }
      if (Broken(packed)) rule.has_error = true;
      rule.packed = std::move(blocks);
    }
    if (style->OPTIONAL() != nullptr) rule.optional = Range(style->OPTIONAL());
    plan.has_error |= rule.has_error;
    rules.push_back(std::move(rule));
    SetLast(&rules.back().comments, statement->getStop());
  }

  const source::SourceBuffer& src_;
  const OffsetMap& offsets_;
  diag::Emitter& diags_;
  std::vector<CommentToken> comments_;
  const std::set<uint32_t>& syntax_errors_;
  size_t next_comment_ = 0;
  Comments* last_ = nullptr;
  uint32_t last_line_ = 0;
  uint32_t last_unknown_line_ = 0;
  const char* section_name_ = "context_parallel";  // the split section being built
};

std::string CommentText(const std::string& token_text) {
  std::string text = token_text.substr(1);
  if (!text.empty() && text[0] == ' ') text.erase(0, 1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

}  // namespace

std::optional<PlanAst> ParseDsl(const source::SourceBuffer& src, diag::Emitter& diags) {
  const uint32_t errors_before = diags.error_count();
  std::string text = SanitizeUtf8(src, diags);
  OffsetMap offsets(text);
  antlr4::ANTLRInputStream input(text);
  WeftPlanLexer lexer(&input);
  ErrorListener listener(src, offsets, diags);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  antlr4::CommonTokenStream tokens(&lexer);
  tokens.fill();

  // Characters the lexer could not use, and comments, are off the parser's channel.
  std::vector<CommentToken> comments;
  for (antlr4::Token* token : tokens.getTokens()) {
    if (token->getType() == WeftPlanLexer::ERROR_CHAR) {
      uint32_t begin = offsets.ByteOf(token->getStartIndex());
      uint32_t end = offsets.ByteOf(token->getStopIndex() + 1);
      std::string ch = src.text().substr(begin, end - begin);
      std::string hint = ch == "'" ? "; patterns are written in double quotes"
                         : ch == ";" ? "; rules end at the end of the line, without `;`"
                         : ch == ":" ? "; write `dim 1`, without `:`"
                                     : "";
      if (ch == "-") hint = "; dims and indexes are non-negative integers";
      // An invisible byte order mark past the start of the file (one at the start is skipped).
      const bool bom = ch == "\xEF\xBB\xBF";
      if (bom) hint = "; weft skips one only at the very start of a file";
      diags.Emit(src.RangeAt(src.id(), begin, end - begin), InvalidCharacter,
                 bom ? std::string("byte order mark (U+FEFF)") : "character `" + ch + "`", hint);
    } else if (token->getType() == WeftPlanLexer::COMMENT) {
      uint32_t begin = offsets.ByteOf(token->getStartIndex());
      uint32_t line_start = begin;
      while (line_start > 0 && src.text()[line_start - 1] != '\n') --line_start;
      bool trailing = false;
      for (uint32_t i = line_start; i < begin; ++i) {
        if (!std::isspace(static_cast<unsigned char>(src.text()[i]))) trailing = true;
      }
      comments.push_back(CommentToken{begin, src.LineColOf(begin).line, trailing,
                                      CommentText(token->getText())});
    }
  }

  // Two-stage parse (the usual ANTLR speed-up): SLL prediction with a bail-out strategy
  // handles every well-formed plan; only when it fails is the input parsed again with full
  // LL prediction, weft's listener and the default recovery, which report the errors.
  WeftPlanParser parser(&tokens);
  parser.removeErrorListeners();
  parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
      antlr4::atn::PredictionMode::SLL);
  parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
  P::PlanContext* tree = nullptr;
  try {
    tree = parser.plan();
  } catch (const antlr4::ParseCancellationException&) {
    tree = nullptr;
  }
  if (tree == nullptr) {
    tokens.seek(0);
    parser.reset();
    parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
    parser.addErrorListener(&listener);
    parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
        antlr4::atn::PredictionMode::LL);
    tree = parser.plan();
  }
  AstBuilder builder(src, offsets, diags, std::move(comments), listener.reported_offsets());
  return builder.Build(tree, listener.count() > 0 || diags.error_count() > errors_before);
}

std::optional<PlanAst> ParsePlan(const source::SourceBuffer& src, diag::Emitter& diags) {
  const std::string& name = src.filename();
  if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
    return ReadJsonPlan(src, diags);
  }
  return ParseDsl(src, diags);
}

}  // namespace weft::syntax
