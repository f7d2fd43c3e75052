#include "compiler/program/suggest.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "compiler/program/equal_sizes.h"
#include "compiler/program/expr.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/lowering.h"
#include "compiler/program/local_sizes.h"

namespace weft::program {
namespace {

constexpr std::string_view kAten = "torch.ops.aten.";
constexpr size_t kMaxFallbacks = 8;  // boundaries kept per source after its first choice
constexpr size_t kMaxTrace = 64;     // nodes a backward or forward trace of TP visits

bool Is(const Node& n, std::initializer_list<std::string_view> ops) {
  const std::string_view t(n.target);
  if (t.substr(0, kAten.size()) != kAten) return false;
  for (std::string_view op : ops) {
    if (t.substr(kAten.size()) == op) return true;
  }
  return false;
}

std::string SizesText(const TensorMeta& m) {
  std::string s = "[";
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    const SymInt& d = m.sizes[i];
    s += (i ? ", " : "") + (d.symbolic ? Expr::Parse(d.expr).Infix() : std::to_string(d.value));
  }
  return s + "]";
}

// The tensors a call passes, each under the name a plan splits it by: the argument, or `arg[i]`
// for the i-th leaf of a list, tuple or dict argument (BriaFibo's `text_encoder_layers`).
std::vector<std::pair<std::string, std::string>> NamedTensors(const CallValues& call) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, leaves] : call.arguments) {
    if (name.empty()) continue;
    if (!call.lists.count(name)) {
      if (leaves.size() == 1 && !leaves[0].empty()) out.emplace_back(name, leaves[0]);
      continue;
    }
    for (size_t k = 0; k < leaves.size(); ++k) {
      if (!leaves[k].empty()) out.emplace_back(name + "[" + std::to_string(k) + "]", leaves[k]);
    }
  }
  return out;
}

// A module boundary a value crosses: the root's argument or output, or a preserved call's.
struct Boundary {
  std::string module;
  std::string argument;  // "" for an output; `arg[i]` for a leaf of a list argument
  int64_t output = -1;
};

class Suggester {
 public:
  explicit Suggester(const Program& p) : p_(p) {}

  // SplitsWhereMade: back from `value` along `dim`, every boundary on the way.
  std::vector<SuggestedSplit> WhereMade(std::string value, int64_t dim) {
    IndexNodes();
    IndexBoundaries();
    std::vector<SuggestedSplit> out;
    for (size_t step = 0; step < kMaxTrace; ++step) {
      const std::string key = DimKey(value, dim);
      if (key.empty()) return out;
      if (boundaries_.count(value)) {
        // Not always tokens: a view's row count may come from it (Wan Animate's face features, by frame).
        const TensorMeta* m = Meta(value);
        std::vector<SuggestedSplit> at =
            SplitsAt(value, dim, "this value has a split's length, " + key + ", along dim " + std::to_string(dim) + " (sizes " +
                                     (m ? SizesText(*m) : "?") + "): a split it meets needs it split alike");
        if (!at.empty()) out.push_back(at.front());
      }
      const Node* n = Producer(value);
      // An attention's output is aligned with its queries, but a split before it changes what
      // the attention is (context-parallel or not): the walk ends there.
      if (n == nullptr || Is(*n, {"scaled_dot_product_attention.default"})) return out;
      // The input that carries the dim: same size (aligned from the right for broadcasts).
      std::string next;
      int64_t next_dim = -1;
      // Each element repeated in place along the dim (a mask per head): its input's rows, each
      // repeated, so a split of the input along the dim is a split of the output.
      if (Is(*n, {"repeat_interleave.self_int"})) {
        const std::optional<int64_t> along = IntInput(*n, "dim");
        const std::vector<std::string> ins = TensorInputs(*n);
        if (along && !ins.empty() && (*along == dim || *along + Rank(value) == dim)) {
          value = ins.front();
          continue;
        }
      }
      for (const std::string& in : TensorInputs(*n)) {
        if (state_input_.count(in)) continue;
        const int64_t r = Rank(in);
        const int64_t aligned = dim - (Rank(value) - r);
        if (aligned >= 0 && aligned < r && DimKey(in, aligned) == key) {
          next = in;
          next_dim = aligned;
          break;
        }
        for (int64_t d = 0; d < r && next.empty(); ++d) {
          if (DimKey(in, d) == key) {
            next = in;
            next_dim = d;
          }
        }
        if (!next.empty()) break;
      }
      if (next.empty()) return out;
      value = next;
      dim = next_dim;
    }
    return out;
  }

  Suggestion Run() {
    s_.class_name = p_.manifest ? p_.manifest->class_name : "";
    if (s_.class_name.empty()) s_.class_name = "Model";
    s_.plan_name = PlanName(s_.class_name);
    IndexNodes();
    EqualSizesFromGuards();
    FindAttention();
    StreamsOfEqualLengths();
    IndexBoundaries();
    FollowTokens();
    Gathers();
    AttentionRules();
    Islands();
    TensorParallel();
    Guidance();
    return std::move(s_);
  }

 private:
  // ---- Sizes ---------------------------------------------------------------------------------
  // A size as comparable text: a constant as "#N"; a symbolic one as the sum of its terms in
  // infix form, sorted (so `s96 + s29` and `s29 + s96` meet), then the representative of the
  // sizes the program's guards make equal (Flux's RoPE ids: `s29 + s96 == s31 + s87`).
  std::string Key(const SymInt& d) {
    if (!d.symbolic) return "#" + std::to_string(d.value);
    auto it = infix_.find(d.expr);
    if (it != infix_.end()) return Find(it->second);
    // One spelling per function of the sizes (equal_sizes.h): Latte's tokens after its temporal
    // blocks, `batch' * tokens // batch`, are its tokens.
    const std::string& expr = spelling_.Expression(d);
    std::string text;
    try {
      text = SumKey(Expr::Parse(expr).SumTerms());
    } catch (const ExprError&) {
      text = expr;
    }
    return Find(infix_.emplace(d.expr, text).first->second);
  }
  static std::string SumKey(std::vector<std::string> terms) {
    std::sort(terms.begin(), terms.end());
    std::string k;
    for (const std::string& t : terms) k += (k.empty() ? "" : " + ") + t;
    return k;
  }
  std::string Find(const std::string& k) {
    auto it = same_.find(k);
    if (it == same_.end() || it->second == k) return k;
    const std::string root = Find(it->second);
    same_[k] = root;
    return root;
  }
  void Unite(const std::string& a, const std::string& b) {
    const std::string ra = Find(a), rb = Find(b);
    if (ra != rb) same_[std::max(ra, rb)] = std::min(ra, rb);
  }
  // Guards `L['a'].size()[i] + ... == L['b'].size()[j] + ...` between the forward's inputs.
  void EqualSizesFromGuards() {
    const GuardInputSizes sizes(p_);
    auto side = [&](std::string text) -> std::string {
      text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
      while (text.size() > 2 && text.front() == '(' && text.back() == ')') text = text.substr(1, text.size() - 2);
      std::vector<std::string> terms;
      size_t start = 0;
      while (start <= text.size()) {
        size_t plus = text.find('+', start);
        if (plus == std::string::npos) plus = text.size();
        const std::string term = text.substr(start, plus - start);
        const SymInt* size = sizes.Of(term);
        if (size == nullptr || !size->symbolic) return "";
        terms.push_back(Expr::Parse(size->expr).Infix());
        start = plus + 1;
      }
      return SumKey(terms);
    };
    for (const std::string& g : p_.guards) {
      const size_t eq = g.find("==");
      if (eq == std::string::npos || g.find("==", eq + 2) != std::string::npos) continue;
      const std::string a = side(g.substr(0, eq)), b = side(g.substr(eq + 2));
      if (!a.empty() && !b.empty()) Unite(a, b);
    }
  }
  // Every size the program holds that is a self-attention's length (under another name) adds
  // its terms as streams of it.
  void StreamsOfEqualLengths() {
    for (const auto& [name, meta] : p_.tensor_values) {
      for (const SymInt& d : meta.sizes) {
        if (!d.symbolic) continue;
        const std::string k = Key(d);
        auto t = terms_.find(k);
        if (t == terms_.end()) continue;
        for (const std::string& term : Expr::Parse(d.expr).SumTerms()) {
          const std::string tk = Find(SumKey({term}));
          t->second.insert(tk);
          tokens_.insert(tk);
        }
      }
    }
  }
  const TensorMeta* Meta(const std::string& v) const { return p_.FindTensor(v); }
  std::string DimKey(const std::string& v, int64_t dim) {
    const TensorMeta* m = Meta(v);
    if (m == nullptr || dim < 0 || dim >= static_cast<int64_t>(m->sizes.size())) return "";
    return Key(m->sizes[static_cast<size_t>(dim)]);
  }
  int64_t Rank(const std::string& v) const {
    const TensorMeta* m = Meta(v);
    return m == nullptr ? 0 : static_cast<int64_t>(m->sizes.size());
  }
  // Two token sizes of one sequence: equal, or one a stream of the other.
  bool Related(const std::string& a, const std::string& b) const {
    if (a == b) return true;
    auto ta = terms_.find(a), tb = terms_.find(b);
    return (tb != terms_.end() && tb->second.count(a)) || (ta != terms_.end() && ta->second.count(b));
  }

  // ---- Program indexes -----------------------------------------------------------------------
  void IndexNodes() {
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      for (const Argument& o : p_.nodes[i].outputs) {
        for (const std::string& v : o.TensorNames()) producer_[v] = i;
      }
    }
    for (size_t i = 0; i < p_.input_specs.size() && i < p_.inputs.size(); ++i) {
      const InputSpec& spec = p_.input_specs[i];
      if (spec.kind != InputSpec::Kind::kUserInput) {
        for (const std::string& v : p_.inputs[i].TensorNames()) state_input_.insert(v);
      }
      if (spec.kind == InputSpec::Kind::kParameter) param_of_[p_.inputs[i].name] = spec.target;
    }
    if (p_.manifest) {
      for (const model::Module& m : p_.manifest->modules) {
        if (m.children.empty()) leaf_modules_.insert(m.path);
      }
    }
  }
  std::string TensorInput(const Node& n, std::string_view name) const {
    for (const NamedArgument& a : n.inputs) {
      if (a.name == name && a.arg.kind == Argument::Kind::kTensor) return a.arg.name;
    }
    return "";
  }
  std::vector<std::string> TensorInputs(const Node& n) const {
    std::vector<std::string> out;
    for (const NamedArgument& a : n.inputs) {
      for (const std::string& v : a.arg.TensorNames()) {
        if (!v.empty()) out.push_back(v);
      }
    }
    return out;
  }
  std::optional<int64_t> IntInput(const Node& n, std::string_view name) const {
    for (const NamedArgument& a : n.inputs) {
      if (a.name == name && a.arg.kind == Argument::Kind::kInt) return a.arg.i;
    }
    return std::nullopt;
  }
  std::vector<std::string> OutputsOf(const Node& n) const {
    std::vector<std::string> out;
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) out.push_back(v);
    }
    return out;
  }
  const Node* Producer(const std::string& v) const {
    auto it = producer_.find(v);
    return it == producer_.end() ? nullptr : &p_.nodes[it->second];
  }
  // The module of a Linear node: its weight's fqn without ".weight".
  std::string LinearModule(const Node& n) const {
    auto it = param_of_.find(TensorInput(n, "weight"));
    if (it == param_of_.end()) return "";
    const std::string& fqn = it->second;
    const size_t dot = fqn.rfind('.');
    return dot == std::string::npos ? "" : fqn.substr(0, dot);
  }
  std::string NormModule(const Node& n) const {
    auto it = param_of_.find(TensorInput(n, "weight"));
    if (it == param_of_.end()) return "";
    const size_t dot = it->second.rfind('.');
    return dot == std::string::npos ? "" : it->second.substr(0, dot);
  }
  // Uses of each value, for forward traces.
  const std::vector<size_t>& Users(const std::string& v) {
    if (users_.empty()) {
      for (size_t i = 0; i < p_.nodes.size(); ++i) {
        for (const std::string& in : TensorInputs(p_.nodes[i])) users_[in].push_back(i);
      }
    }
    static const std::vector<size_t> kNone;
    auto it = users_.find(v);
    return it == users_.end() ? kNone : it->second;
  }

  // True when `module` is a submodule of an attention module (its projections, norms).
  bool InsideAttention(const std::string& module) const {
    if (!p_.manifest) return false;
    const auto& types = p_.manifest->attention_types;
    for (const model::Module& m : p_.manifest->modules) {
      if (std::find(types.begin(), types.end(), m.type) == types.end()) continue;
      if (module.size() > m.path.size() && module.compare(0, m.path.size() + 1, m.path + ".") == 0) return true;
    }
    return false;
  }

  // ---- Attention sites and the sequence ------------------------------------------------------
  struct Site {
    size_t node = 0;
    std::string module;
    std::string q, k, v, out;
    std::string q_len, k_len;
    int64_t heads = 0;
    bool self = false;
    int64_t q_token_dim = 2;  // SDPA's (B, H, S, D); a linear attention's queries are (B, H, D, S)
  };

  // A linear attention (Sana's ReLU kernel): `scores = V @ K` sums over the keys (V: (B, H, D', S),
  // K: (B, H, S, D)), then `out = scores @ Q` (Q: (B, H, D, S)), with no softmax between. Its
  // tokens can be split: the key sums are all-reduced over the CP group (shard_flow.h).
  void FindLinearAttention() {
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const Node& n = p_.nodes[i];
      if (!Is(n, {"matmul.default"})) continue;
      const Node* scores = Producer(TensorInput(n, "self"));
      if (scores == nullptr || !Is(*scores, {"matmul.default"})) continue;
      Site site;
      site.node = i;
      site.module = AttentionModule(n);
      site.q = TensorInput(n, "other");
      site.k = TensorInput(*scores, "other");
      site.v = TensorInput(*scores, "self");
      const std::vector<std::string> outs = OutputsOf(n);
      site.out = outs.empty() ? "" : outs[0];
      const TensorMeta* q = Meta(site.q);
      const TensorMeta* k = Meta(site.k);
      const TensorMeta* v = Meta(site.v);
      if (q == nullptr || k == nullptr || v == nullptr || q->sizes.size() != 4 || k->sizes.size() != 4 ||
          v->sizes.size() != 4 || !q->sizes[3].symbolic) {
        continue;
      }
      site.q_token_dim = 3;
      site.q_len = Key(q->sizes[3]);
      site.k_len = Key(k->sizes[2]);
      if (Key(v->sizes[3]) != site.k_len) continue;  // the sum runs over the keys' tokens
      site.heads = q->sizes[1].symbolic ? 0 : q->sizes[1].value;
      site.self = site.q_len == site.k_len;
      // Its tokens are a sequence to split through the model like a softmax attention's (Sana's
      // blocks pass a split on, their Mix-FFN convolution exchanging the grid's edge rows).
      if (site.self) {
        tokens_.insert(site.q_len);
        auto& t = terms_[site.q_len];
        for (const std::string& term : Expr::Parse(q->sizes[3].expr).SumTerms()) {
          const std::string tk = Find(SumKey({term}));
          t.insert(tk);
          tokens_.insert(tk);
        }
      }
      linear_sites_.push_back(std::move(site));
    }
  }

  std::string AttentionModule(const Node& n) const {
    const std::string owner = AttentionOwner(p_, n);
    return owner.empty() ? ModuleOf(p_, n) : owner;
  }

  void FindAttention() {
    std::vector<std::string> fixed;
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const Node& n = p_.nodes[i];
      if (!Is(n, {"scaled_dot_product_attention.default"})) continue;
      Site site;
      site.node = i;
      site.module = AttentionModule(n);
      site.q = TensorInput(n, "query");
      site.k = TensorInput(n, "key");
      site.v = TensorInput(n, "value");
      const std::vector<std::string> outs = OutputsOf(n);
      site.out = outs.empty() ? "" : outs[0];
      const TensorMeta* q = Meta(site.q);
      const TensorMeta* k = Meta(site.k);
      if (q == nullptr || k == nullptr || q->sizes.size() != 4 || k->sizes.size() != 4) continue;
      site.q_len = Key(q->sizes[2]);
      site.k_len = Key(k->sizes[2]);
      site.heads = q->sizes[1].symbolic ? 0 : q->sizes[1].value;
      site.self = site.q_len == site.k_len;
      // Joint keys: the queries' tokens are one stream of the keys (PRX attends image queries to
      // [text | image] keys): the keys' length is the sequence, the queries' a stream of it.
      bool joint_keys = false;
      if (!site.self && q->sizes[2].symbolic && k->sizes[2].symbolic) {
        for (const std::string& term : Expr::Parse(k->sizes[2].expr).SumTerms()) {
          joint_keys = joint_keys || Find(SumKey({term})) == site.q_len;
        }
      }
      if (!batch_key_.empty() || !q->sizes[0].symbolic) {
      } else {
        batch_key_ = Key(q->sizes[0]);
        batch_infix_ = spelling_.Infix(q->sizes[0]);
        batch_site_ = site.module;
      }
      if (joint_keys) {
        site.self = true;
        tokens_.insert(site.k_len);
        auto& t = terms_[site.k_len];
        for (const std::string& term : Expr::Parse(k->sizes[2].expr).SumTerms()) {
          const std::string tk = Find(SumKey({term}));
          t.insert(tk);
          tokens_.insert(tk);
        }
      } else if (site.self && !q->sizes[2].symbolic) {
        fixed.push_back((site.module.empty() ? std::string("the root") : "`" + site.module + "`") + " (" +
                        std::to_string(q->sizes[2].value) + " tokens)");
      } else if (site.self) {
        tokens_.insert(site.q_len);
        auto& t = terms_[site.q_len];
        for (const std::string& term : Expr::Parse(q->sizes[2].expr).SumTerms()) {
          const std::string tk = Find(SumKey({term}));
          t.insert(tk);
          tokens_.insert(tk);
        }
      }
      sites_.push_back(std::move(site));
    }
    FindLinearAttention();
    if (sites_.empty() && linear_sites_.empty()) {
      throw SuggestError(p_.Where() + ": the program has no scaled_dot_product_attention node, so there is no "
                         "sequence to run context-parallel and no heads to shard; weft suggest proposes plans for "
                         "transformers whose attention torch.export kept as one node");
    }
    if (tokens_.empty() && std::none_of(linear_sites_.begin(), linear_sites_.end(), [](const Site& x) { return x.self; })) {
      std::string inputs;
      const std::vector<CallValues> root = ModuleCallValues(p_, "");
      for (const auto& [name, leaves] : root.empty() ? std::vector<std::pair<std::string, std::vector<std::string>>>{}
                                                     : root[0].arguments) {
        if (leaves.size() != 1 || leaves[0].empty()) continue;
        const TensorMeta* m = Meta(leaves[0]);
        if (m == nullptr || m->sizes.size() < 2) continue;
        bool any = false;
        for (size_t d = 1; d < m->sizes.size(); ++d) any = any || m->sizes[d].symbolic;
        if (!any) inputs += (inputs.empty() ? "`" : ", `") + name + "` " + SizesText(*m);
      }
      if (fixed.empty()) {
        s_.cp_dropped = "no attention of the program is self-attention over one length (queries and keys differ at "
                        "every site), so weft finds no sequence to split";
      } else {
        s_.cp_dropped = "the token length of every self-attention is fixed in the program (" +
                         fixed.front() + (fixed.size() > 1 ? " and " + std::to_string(fixed.size() - 1) + " more" : "") +
                         "): the export specialised it" + (inputs.empty() ? "" : ", from the inputs " + inputs) +
                         FixedByTheForward();
      }
      s_.notes.push_back("no context_parallel section: " + s_.cp_dropped);
    }
  }

  // Why the tokens are constants, from the sizes the export saw the forward fix (Manifest::
  // fixed_sizes; one per source line, at most three), or how to look for it where none is recorded.
  std::string FixedByTheForward() const {
    const std::vector<FixedSize>& all = p_.FixedSizes();
    if (all.empty()) {
      return ". Export again with the token dims dynamic: tools/export_program.py marks every dim "
             "Dim.AUTO, and torch keeps a dim only when the model's forward does not fix it -- give an "
             "example whose token counts are not 1 and not equal to a config size, and look for a "
             "`sample_size`-like config value the forward compares them with";
    }
    std::vector<const FixedSize*> lines;
    for (const FixedSize& f : all) {
      if (std::none_of(lines.begin(), lines.end(), [&](const FixedSize* x) { return x->at == f.at; })) lines.push_back(&f);
    }
    std::string text = "; the forward fixed ";
    for (size_t i = 0; i < lines.size() && i < 3; ++i) {
      const FixedSize& f = *lines[i];
      text += (i == 0 ? "`" : ", `") + f.size + "` = " + std::to_string(f.value) + " at " + f.at +
              (f.code.empty() ? "" : " (`" + f.code + "`)");
    }
    if (all.size() > std::min<size_t>(lines.size(), 3)) {
      text += " and " + std::to_string(all.size() - std::min<size_t>(lines.size(), 3)) + " more (weft program lists them)";
    }
    return text + ". A size the forward reads as a Python int (`len(t)`, `int(t.shape[0])`) or compares with a "
                  "constant becomes a constant of the program: no export makes it dynamic until that line "
                  "of the model keeps it a tensor size";
  }

  // ---- Boundaries ----------------------------------------------------------------------------
  void AddBoundary(const std::string& v, Boundary b) {
    if (v.empty() || Meta(v) == nullptr) return;
    auto& list = boundaries_[v];
    for (const Boundary& x : list) {
      if (x.module == b.module && x.argument == b.argument && x.output == b.output) return;
    }
    list.push_back(std::move(b));
  }
  void IndexBoundaries() {
    std::set<std::string> modules;
    for (const ModuleCall& call : p_.module_calls) {
      if (call.has_signature) modules.insert(call.fqn.substr(0, call.fqn.find('@')));
    }
    modules.insert("");
    for (const std::string& m : modules) {
      for (const CallValues& call : ModuleCallValues(p_, m)) {
        for (const auto& [name, value] : NamedTensors(call)) AddBoundary(value, {m, name, -1});
        for (size_t i = 0; i < call.outputs.size(); ++i) AddBoundary(call.outputs[i], {m, "", static_cast<int64_t>(i)});
      }
    }
    // Outputs first (innermost first: a split right after the value is made), then arguments.
    for (auto& [v, list] : boundaries_) {
      std::stable_sort(list.begin(), list.end(), [](const Boundary& a, const Boundary& b) {
        if ((a.output >= 0) != (b.output >= 0)) return a.output >= 0;
        if (a.output >= 0) return std::count(a.module.begin(), a.module.end(), '.') + !a.module.empty() >
                                  std::count(b.module.begin(), b.module.end(), '.') + !b.module.empty();
        return false;
      });
    }
  }

  // The splits a boundary of `v` can be written as, along `dim`: an output as itself; the
  // arguments of the calls that receive `v` (leaf modules left out: splitting a Linear's input
  // is splitting its output), the calls of one container as one glob.
  std::vector<SuggestedSplit> SplitsAt(const std::string& v, int64_t dim, const std::string& why) {
    std::vector<SuggestedSplit> out;
    auto it = boundaries_.find(v);
    if (it == boundaries_.end()) return out;
    std::map<std::pair<std::string, std::string>, std::vector<std::string>> args;  // (glob, argument) -> modules
    std::vector<std::pair<std::string, std::string>> order;
    for (const Boundary& b : it->second) {
      SuggestedSplit s;
      s.dim = dim;
      s.rank = Rank(v);
      s.why = why;
      if (b.output >= 0) {
        if (b.module.empty()) continue;  // the root's output: a gather, never a split
        // Inside an attention module its projections' outputs are Q, K, V: a split there is one
        // of three that must agree; the attention's own inputs are the place.
        if (InsideAttention(b.module)) continue;
        s.module = b.module;
        s.output = b.output;
        out.push_back(std::move(s));
        continue;
      }
      if (!b.module.empty() && leaf_modules_.count(b.module)) continue;
      if (InsideAttention(b.module)) continue;
      const std::pair<std::string, std::string> key{GlobOfPath(b.module), b.argument};
      if (!args.count(key)) order.push_back(key);
      args[key].push_back(b.module);
    }
    for (const auto& key : order) {
      const std::vector<std::string>& mods = args[key];
      SuggestedSplit s;
      s.module = mods.size() > 1 ? key.first : mods[0];
      s.argument = key.second;
      s.dim = dim;
      s.rank = Rank(v);
      s.why = why + (mods.size() > 1 ? " (every one of the " + std::to_string(mods.size()) + " calls receives it)" : "");
      out.push_back(std::move(s));
    }
    return out;
  }

  // ---- Token dims, followed forward ----------------------------------------------------------
  struct Reached {
    int64_t dim;
    size_t source;
    // The tokens folded into this dim with the dims before them (Latte's (batch x tokens, frames,
    // C)): rows of other ops there -- an attention's batch -- not a sequence to split or gather.
    bool merged = false;
    // The tokens parted by a view into (rows, the row's dims), this dim the rows (Kandinsky 5's
    // latent frames after its last block): still split -- in whole rows -- so a module's output
    // holding them may be gathered along it, though it is no attention's sequence.
    bool rows = false;
  };

  bool IsReached(const std::string& v, int64_t dim) const {
    auto it = reached_.find(v);
    if (it == reached_.end()) return false;
    for (const Reached& r : it->second) {
      if (r.dim == dim) return true;
    }
    return false;
  }
  // Reached on a sequence dim, not only folded into another.
  bool ReachedUnmerged(const std::string& v) const {
    auto it = reached_.find(v);
    if (it == reached_.end()) return false;
    for (const Reached& r : it->second) {
      if (!r.merged) return true;
    }
    return false;
  }
  void ReachMerged(const std::string& v, int64_t dim, size_t source, bool rows = false) {
    if (IsReached(v, dim)) return;
    reached_[v].push_back({dim, source, true, rows});
  }
  void Reach(const std::string& v, int64_t dim, size_t source) {
    if (IsReached(v, dim)) return;
    reached_[v].push_back({dim, source});
    reach_order_.push_back({v, dim, source});
  }
  // `v` starts a split: a token dim at a boundary that no earlier split reaches.
  void NewSource(const std::string& v, int64_t dim, const std::string& why) {
    std::vector<SuggestedSplit> at = SplitsAt(v, dim, why);
    if (at.empty()) return;
    TokenSource src;
    src.at = std::move(at);
    s_.sources.push_back(std::move(src));
    source_value_.push_back(v);
    Reach(v, dim, s_.sources.size() - 1);
  }
  std::string TokenWhy(const std::string& v, int64_t dim, const std::string& what) {
    const TensorMeta* m = Meta(v);
    std::string site;
    const std::string key = DimKey(v, dim);
    for (const Site& x : sites_) {
      if (x.self && Related(key, x.q_len)) {
        site = x.module;
        break;
      }
    }
    return what + " carries tokens along dim " + std::to_string(dim) + " (sizes " + (m ? SizesText(*m) : "?") + "; " +
           key + " tokens" + (site.empty() ? "" : " attend in `" + site + "`") + ")";
  }

  // The token length a source splits.
  std::string SourceKey(size_t source) {
    return DimKey(source_value_[source], s_.sources[source].at.front().dim);
  }

  // Output dim `d` of a node holding tokens folded in with the dims before them (Latte views
  // (batch, tokens, frames, C) as (batch x tokens, frames, C) for its temporal attention): a view
  // whose output dim spans a reached token dim and the dims before it, or any node keeping such a
  // folded dim as it is (the same size). Followed so that the tokens are found again where a view
  // parts the dim (FollowTokens), and so that an attention over such rows is known to run local.
  void FoldedReach(bool view, const std::string& o, int64_t d, const std::string& key,
                   const std::vector<std::pair<std::string, Reached>>& in) {
    for (const auto& [v, r] : in) {
      if (r.merged && DimKey(v, r.dim) == key) return ReachMerged(o, d, r.source, r.rows);
      if (!view) continue;
      const TensorMeta* a = Meta(v);
      const TensorMeta* b = Meta(o);
      if (a == nullptr || b == nullptr || r.dim >= static_cast<int64_t>(a->sizes.size())) continue;
      const int64_t before_in = HintsBefore(*a, r.dim), before_out = HintsBefore(*b, d);
      if (r.merged) {
        // Rows of the tokens folded again with the dims before them, or parted back out of such a
        // fold as its innermost part (Wan Animate's face adapter: the tokens viewed per frame, (batch
        // x frames) attending each frame's face features, and back): still those rows.
        const int64_t in_through = before_in * a->sizes[static_cast<size_t>(r.dim)].value;
        const int64_t out_through = before_out * b->sizes[static_cast<size_t>(d)].value;
        if (in_through == out_through && (before_out <= before_in || b->sizes[static_cast<size_t>(d)].value > 1)) {
          return ReachMerged(o, d, r.source, r.rows);
        }
        if (TokensFromRows(o, d, key, v, r)) return;
        continue;
      }
      // The output dim is the outer part of the token dim, which the view parts into rows.
      const int64_t tokens = a->sizes[static_cast<size_t>(r.dim)].value, outer = b->sizes[static_cast<size_t>(d)].value;
      if (before_in == before_out && outer > 1 && outer < tokens && tokens % outer == 0) {
        return ReachMerged(o, d, r.source, /*rows=*/true);
      }
      const int64_t out_before = before_out, out_through = before_out * b->sizes[static_cast<size_t>(d)].value;
      int64_t in_prefix = 1, start = -1;
      for (int64_t k = 0; k < static_cast<int64_t>(a->sizes.size()); ++k) {
        if (in_prefix == out_before && start < 0) start = k;
        in_prefix *= a->sizes[static_cast<size_t>(k)].value;
        if (k == r.dim) break;
      }
      // The output dim starts at an input dim before the token dim and ends at or after it.
      if (start >= 0 && start < r.dim && in_prefix <= out_through && out_through % in_prefix == 0) {
        return ReachMerged(o, d, r.source);
      }
    }
  }

  // The product of `m`'s sizes (at their hints) before dim `dim`.
  static int64_t HintsBefore(const TensorMeta& m, int64_t dim) {
    int64_t product = 1;
    for (int64_t k = 0; k < dim; ++k) product *= m.sizes[static_cast<size_t>(k)].value;
    return product;
  }

  // Rows of the tokens (`r`, reached on `v`) flattened back by a view with the row's dims into output
  // dim `d` of `o`, of the tokens' length: the tokens, though spelled otherwise (Wan Animate's
  // `frames * (tokens // frames)`, the frame count read off the face video), a spelling that is the
  // tokens' from here on.
  bool TokensFromRows(const std::string& o, int64_t d, const std::string& key, const std::string& v, const Reached& r) {
    const TensorMeta* a = Meta(v);
    const TensorMeta* b = Meta(o);
    const TensorMeta* src = Meta(source_value_[r.source]);
    const int64_t src_dim = s_.sources[r.source].at.front().dim;
    if (!r.rows || a == nullptr || b == nullptr || src == nullptr || src_dim >= static_cast<int64_t>(src->sizes.size()) ||
        r.dim >= static_cast<int64_t>(a->sizes.size()) || d >= static_cast<int64_t>(b->sizes.size())) {
      return false;
    }
    if (HintsBefore(*b, d) != HintsBefore(*a, r.dim) || b->sizes[static_cast<size_t>(d)].value != src->sizes[static_cast<size_t>(src_dim)].value) {
      return false;
    }
    const std::string tokens = Find(SourceKey(r.source));
    if (Find(key) != tokens) same_[Find(key)] = tokens;
    Reach(o, d, r.source);
    return true;
  }

  void FollowTokens() {
    const std::vector<CallValues> root = ModuleCallValues(p_, "");
    if (!root.empty()) {
      for (const auto& [name, value] : NamedTensors(root[0])) {
        for (int64_t d = 0; d < Rank(value); ++d) {
          if (tokens_.count(DimKey(value, d)) && !IsReached(value, d)) {
            NewSource(value, d, TokenWhy(value, d, "the forward argument `" + name + "`"));
          }
        }
      }
    }
    for (const Node& n : p_.nodes) {
      std::vector<std::pair<std::string, Reached>> in;
      for (const std::string& v : TensorInputs(n)) {
        auto it = reached_.find(v);
        if (it == reached_.end()) continue;
        for (const Reached& r : it->second) in.emplace_back(v, r);
      }
      const bool view =
          Is(n, {"view.default", "reshape.default", "_unsafe_view.default", "flatten.using_ints", "unflatten.int"});
      for (const std::string& o : OutputsOf(n)) {
        for (int64_t d = 0; d < Rank(o); ++d) {
          const std::string key = DimKey(o, d);
          if (!tokens_.count(key)) {
            FoldedReach(view, o, d, key, in);
            continue;
          }
          for (const auto& [v, r] : in) {
            // Folded tokens parted again by a view: the tokens of their source, on a dim of their own.
            if (r.merged ? view && Related(SourceKey(r.source), key) : Related(DimKey(v, r.dim), key)) {
              Reach(o, d, r.source);
              break;
            }
            if (r.merged && view && TokensFromRows(o, d, key, v, r)) break;
          }
          if (!IsReached(o, d) && boundaries_.count(o) && !state_input_.count(o)) {
            const Boundary& b = boundaries_[o].front();
            const std::string what = b.output >= 0 ? "output " + std::to_string(b.output) + " of `" + b.module + "`"
                                                   : "argument `" + b.argument + "` of `" + b.module + "`";
            NewSource(o, d, TokenWhy(o, d, what + " (node `" + n.name + "`)"));
          }
        }
      }
    }
    // Fallbacks: the boundaries each source's tokens reach, in program order, up to the last
    // attention they reach (a split after it would run no attention context-parallel).
    std::vector<size_t> last_attention(s_.sources.size(), 0);
    for (const Site& x : sites_) {
      for (const std::string& v : {x.q, x.k}) {
        auto it = reached_.find(v);
        if (it == reached_.end()) continue;
        for (const Reached& r : it->second) last_attention[r.source] = std::max(last_attention[r.source], x.node);
      }
    }
    // A stream joined into another before any attention (its reach recorded under the other's
    // source) may be split up to the last attention of all.
    size_t last_of_all = 0;
    for (size_t a : last_attention) last_of_all = std::max(last_of_all, a);
    for (size_t& a : last_attention) {
      if (a == 0) a = last_of_all;
    }
    // A value counts for the source it was reached from, and for every source of the same
    // stream (the same length): once streams are joined and parted again, the part is reached
    // from whichever joined first (CogView3Plus's image tokens after the embedding's concat).
    std::vector<std::string> stream_of(s_.sources.size());
    for (size_t i = 0; i < s_.sources.size(); ++i) {
      stream_of[i] = DimKey(source_value_[i], s_.sources[i].at.front().dim);
    }
    std::vector<std::tuple<std::string, int64_t, size_t>> candidates;
    for (const auto& [v, dim, source] : reach_order_) {
      candidates.emplace_back(v, dim, source);
      const std::string key = DimKey(v, dim);
      for (size_t i = 0; i < s_.sources.size(); ++i) {
        if (i != source && stream_of[i] == key && stream_of[source] != key) candidates.emplace_back(v, dim, i);
      }
    }
    for (const auto& [v, dim, source] : candidates) {
      if (v == source_value_[source]) continue;
      auto made = producer_.find(v);
      if (made != producer_.end() && made->second >= last_attention[source]) continue;
      TokenSource& src = s_.sources[source];
      if (src.at.size() > kMaxFallbacks) continue;
      const SuggestedSplit& first = src.at.front();
      const std::string why = "moved here from " + (first.module.empty() ? std::string("the root") : "`" + first.module + "`") + " by the checks; " +
                              TokenWhy(v, dim, "this value");
      for (SuggestedSplit& s : SplitsAt(v, dim, why)) {
        bool seen = false;
        for (const SuggestedSplit& x : src.at) {
          seen = seen || (x.module == s.module && x.argument == s.argument && x.output == s.output);
        }
        if (!seen && src.at.size() <= kMaxFallbacks) src.at.push_back(std::move(s));
      }
    }
  }

  // ---- Gathers -------------------------------------------------------------------------------
  // For each forward output, the nearest module output before it holding split tokens (of
  // `source` only, when given), walking back through its producers.
  std::vector<SuggestedGather> GathersOf(std::optional<size_t> source) {
    std::vector<SuggestedGather> gathers;
    const std::vector<CallValues> root = ModuleCallValues(p_, "");
    if (root.empty()) return gathers;
    for (size_t i = 0; i < root[0].outputs.size(); ++i) {
      const std::string& out = root[0].outputs[i];
      if (out.empty()) continue;
      std::vector<std::string> queue = {out};
      std::unordered_set<std::string> seen = {out};
      for (size_t at = 0; at < queue.size() && at < 4 * kMaxTrace; ++at) {
        const std::string v = queue[at];
        auto r = reached_.find(v);
        auto b = boundaries_.find(v);
        const auto reach = r == reached_.end() ? std::vector<Reached>::const_iterator{}
                                               : std::find_if(r->second.begin(), r->second.end(), [&](const Reached& x) {
                                                   return (!x.merged || x.rows) && (!source || x.source == *source);
                                                 });
        if (r != reached_.end() && b != boundaries_.end() && reach != r->second.end()) {
          const Boundary* chosen = nullptr;
          for (const Boundary& x : b->second) {
            // Rows are gathered where a module returns them, never as the forward's own output
            // (whose unpatchify views tokens as a grid: gathered where the tokens still are).
            if (x.output < 0 || (reach->rows && x.module.empty())) continue;
            if (chosen == nullptr || (chosen->module.empty() && !x.module.empty())) chosen = &x;
          }
          if (chosen != nullptr) {
            SuggestedGather g;
            g.module = chosen->module;
            g.output = chosen->output;
            g.dim = reach->dim;
            g.rank = Rank(v);
            g.why = (chosen->module.empty() ? std::string("the forward's output ") + std::to_string(i)
                                            : "output " + std::to_string(chosen->output) + " of `" + chosen->module + "`") +
                    " holds the split tokens along dim " + std::to_string(g.dim) + " (sizes " + SizesText(*Meta(v)) + ")" +
                    (v == out ? "" : "; the forward's output " + std::to_string(i) + " is computed from it");
            gathers.push_back(std::move(g));
            break;
          }
        }
        if (const Node* n = Producer(v)) {
          std::vector<std::string> ins = TensorInputs(*n);
          // type_as reads only the dtype of its second input: its data is the first's. Followed,
          // the second leads past the module outputs in between (ACE-Step's `type_as(adaLN(norm_out(x)),
          // x)` reached the last block's output before `norm_out`'s).
          if (Is(*n, {"type_as.default"}) && ins.size() > 1) ins.resize(1);
          for (const std::string& in : ins) {
            if (!state_input_.count(in) && seen.insert(in).second) queue.push_back(in);
          }
        }
      }
    }
    return gathers;
  }
  void Gathers() {
    s_.gathers = GathersOf(std::nullopt);
    for (size_t i = 0; i < s_.sources.size(); ++i) s_.gathers_of_source.push_back(GathersOf(i));
  }

  // ---- Attention islands ---------------------------------------------------------------------
  void Islands() {
    std::set<std::string> done;
    std::vector<Site> all = sites_;
    all.insert(all.end(), linear_sites_.begin(), linear_sites_.end());
    for (const Site& x : all) {
      if (!x.self || x.module.empty()) continue;
      const std::string glob = GlobOfPath(x.module);
      if (!done.insert(glob).second) continue;
      const std::vector<CallValues> calls = ModuleCallValues(p_, x.module);
      if (calls.empty()) continue;
      const std::string why = std::string(x.q_token_dim == 2 ? "around the self-attention `" : "around the linear attention `") +
                              glob + "` only: split where it is called, gathered where it returns (no split flows "
                              "through the model to it)" + (x.q_token_dim == 2 ? "" : "; its key sums are all-reduced over cp");
      // A token dim: one the walk knows as tokens, or else a symbolic one as long as the queries
      // at the example (Helios's RoPE of history + chunk, built from other symbols). Splitting it
      // alike is exact wherever it meets the tokens elementwise; anything else it meets, the
      // checks refuse.
      const TensorMeta* q = Meta(x.q);
      const int64_t q_length = q != nullptr && q->sizes.size() == 4 ? q->sizes[static_cast<size_t>(x.q_token_dim)].value : -1;
      auto token_dim = [&](const std::string& v) -> int64_t {
        for (int64_t d = 0; d < Rank(v); ++d) {
          if (tokens_.count(DimKey(v, d))) return d;
        }
        const TensorMeta* m = Meta(v);
        // Dim 0 too where it is not the batch: a table of one row per token (OmniGen's RoPE cos
        // and sin, (S, D)).
        const bool batch_led = m != nullptr && !m->sizes.empty() && Key(m->sizes[0]) == batch_key_;
        for (int64_t d = batch_led ? 1 : 0; m != nullptr && d < Rank(v); ++d) {
          const SymInt& size = m->sizes[static_cast<size_t>(d)];
          if (size.symbolic && size.value == q_length) return d;
        }
        return -1;
      };
      std::vector<TokenSource> splits;
      std::set<std::string> split_values;
      for (const auto& [name, v] : NamedTensors(calls[0])) {
        const int64_t d = token_dim(v);
        if (d < 0) continue;
        // One value passed as two arguments (OmniGen's self-attention gets its hidden states as
        // `encoder_hidden_states` too) is split once.
        if (!split_values.insert(v).second) continue;
        // A mask over (query, key) pairs -- the tokens along two dims -- stays whole: each rank
        // applies its rows of it.
        const TensorMeta* m = Meta(v);
        int64_t token_dims = 0;
        for (int64_t e = 0; m != nullptr && e < Rank(v); ++e) {
          token_dims += m->sizes[static_cast<size_t>(e)].symbolic && m->sizes[static_cast<size_t>(e)].value == q_length ? 1 : 0;
        }
        if (token_dims > 1) continue;
        TokenSource t;
        t.at.push_back({glob, name, -1, d, Rank(v), TokenWhy(v, d, "`" + name + "` of `" + x.module + "`") + "; " + why});
        splits.push_back(std::move(t));
      }
      std::vector<SuggestedGather> gathers;
      for (size_t i = 0; i < calls[0].outputs.size(); ++i) {
        const std::string& o = calls[0].outputs[i];
        const int64_t d = o.empty() ? -1 : token_dim(o);
        if (d < 0) continue;
        gathers.push_back({glob, static_cast<int64_t>(i), d, Rank(o),
                           "output " + std::to_string(i) + " of `" + glob + "` back whole along dim " + std::to_string(d)});
      }
      if (splits.empty() || gathers.empty()) continue;
      for (TokenSource& t : splits) s_.island_sources.push_back(std::move(t));
      for (SuggestedGather& g : gathers) s_.island_gathers.push_back(std::move(g));
      // A linear attention is no attention site of the graph view (no SDPA): its splits and
      // gathers are all it takes, the compiler finds its key sums.
      if (x.q_token_dim == 2) {
        s_.island_attention.push_back({glob, true, "self-attention over the tokens split around it (node `" +
                                                       p_.nodes[x.node].name + "`, " + std::to_string(x.heads) + " heads)"});
      }
    }
  }

  // ---- Attention rules -----------------------------------------------------------------------
  void AttentionRules() {
    std::map<std::string, std::pair<bool, std::string>> by_glob;
    std::vector<std::string> order;
    for (const Site& x : sites_) {
      if (reached_.find(x.q) == reached_.end()) continue;
      const bool folded = !ReachedUnmerged(x.q);
      const bool cp = x.self && !folded && ReachedUnmerged(x.k);
      const std::string glob = GlobOfPath(x.module);
      if (!by_glob.count(glob)) {
        order.push_back(glob);
        const std::string why =
            folded ? "self-attention over " + x.q_len + " (node `" + p_.nodes[x.node].name +
                         "`) whose batch rows hold the split tokens (folded in with the dims before them): each rank "
                         "attends its own rows, local"
            : cp ? "self-attention over the split tokens (node `" + p_.nodes[x.node].name + "`: queries and keys of " +
                       x.q_len + ", " + std::to_string(x.heads) + " heads)"
                 : "cross-attention: its queries are split, its keys (" + x.k_len + ") are whole on every rank (node `" +
                       p_.nodes[x.node].name + "`)";
        by_glob[glob] = {cp, why};
      }
      if (cp) {
        s_.min_heads = s_.min_heads == 0 ? x.heads : std::min(s_.min_heads, x.heads);
      }
    }
    for (const std::string& g : order) s_.attention.push_back({g, by_glob[g].first, by_glob[g].second});
  }

  // ---- Tensor parallelism --------------------------------------------------------------------
  struct TpModule {
    std::string module;
    bool colwise = true;
    std::vector<int64_t> packed;
    std::string owner;  // the glob the rule is grouped under
    std::string why;
  };

  // A fused projection's blocks: the widths its output is split into along the features
  // (Flux2's [Q | K | V | MLP gate | MLP up]: a split, then each part split again), or {} when
  // it is used whole. Colwise sharding takes each rank's part of every block.
  std::vector<int64_t> PackedBlocks(const std::string& v, int depth = 0) {
    const TensorMeta* m = Meta(v);
    if (m == nullptr || m->sizes.empty() || m->sizes.back().symbolic || depth > 4) return {};
    const int64_t width = m->sizes.back().value;
    // Slices of the features that tile them (SwiGLU's x[..., :h] and x[..., h:]).
    std::vector<std::pair<int64_t, std::string>> slices;  // start -> the slice
    std::vector<int64_t> ends;
    for (size_t u : Users(v)) {
      const Node& n = p_.nodes[u];
      if (!Is(n, {"slice.Tensor"}) || TensorInputs(n).empty() || TensorInputs(n)[0] != v) continue;
      const int64_t dim = IntInput(n, "dim").value_or(0);
      const std::vector<std::string> outs = OutputsOf(n);
      const TensorMeta* om = outs.empty() ? nullptr : Meta(outs[0]);
      if ((dim != -1 && dim != Rank(v) - 1) || om == nullptr || om->sizes.back().symbolic) return {};
      const int64_t start = IntInput(n, "start").value_or(0);
      slices.emplace_back(start, outs[0]);
      ends.push_back(start + om->sizes.back().value);
    }
    if (slices.size() > 1) {
      std::vector<size_t> order(slices.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return slices[a].first < slices[b].first; });
      std::vector<int64_t> blocks;
      int64_t at = 0;
      for (size_t i : order) {
        if (slices[i].first != at) return {};
        std::vector<int64_t> sub = PackedBlocks(slices[i].second, depth + 1);
        if (sub.empty()) sub = {ends[i] - slices[i].first};
        blocks.insert(blocks.end(), sub.begin(), sub.end());
        at = ends[i];
      }
      return at == width ? blocks : std::vector<int64_t>{};
    }
    for (size_t u : Users(v)) {
      const Node& n = p_.nodes[u];
      if (n.target == "_operator.getitem") {
        const std::vector<std::string> outs = OutputsOf(n);
        if (!outs.empty()) return PackedBlocks(outs[0], depth + 1);
      }
      if (!Is(n, {"split_with_sizes.default", "split.Tensor", "chunk.default"}) || TensorInputs(n).empty() ||
          TensorInputs(n)[0] != v) {
        continue;
      }
      const int64_t dim = IntInput(n, "dim").value_or(0);
      if (dim != -1 && dim != Rank(v) - 1) continue;
      std::vector<int64_t> blocks;
      for (const std::string& piece : OutputsOf(n)) {
        std::vector<int64_t> sub = PackedBlocks(piece, depth + 1);
        if (sub.empty()) {
          const TensorMeta* pm = Meta(piece);
          if (pm == nullptr || pm->sizes.empty() || pm->sizes.back().symbolic) return {};
          sub = {pm->sizes.back().value};
        }
        blocks.insert(blocks.end(), sub.begin(), sub.end());
      }
      if (std::accumulate(blocks.begin(), blocks.end(), int64_t{0}) != width) return {};
      return blocks;
    }
    return {};
  }
  std::vector<int64_t> PackedOf(const Node& linear) {
    const std::vector<std::string> outs = OutputsOf(linear);
    std::vector<int64_t> blocks = outs.empty() ? std::vector<int64_t>{} : PackedBlocks(outs[0]);
    return blocks.size() > 1 ? blocks : std::vector<int64_t>{};
  }

  // The Linears whose outputs reach `value` through reshapes, norms, RoPE and concatenations,
  // and the norms over all heads on the way (colwise like them).
  void TraceProducers(const std::string& value, const std::string& owner, const std::string& why,
                      std::vector<TpModule>& out) {
    std::vector<std::string> queue = {value};
    std::unordered_set<std::string> seen = {value};
    for (size_t at = 0; at < queue.size() && at < kMaxTrace; ++at) {
      const Node* n = Producer(queue[at]);
      if (n == nullptr) continue;
      if (Is(*n, {"linear.default"})) {
        const std::string m = LinearModule(*n);
        if (!m.empty()) out.push_back({m, true, PackedOf(*n), owner, why});
        continue;
      }
      std::vector<std::string> next;
      if (Is(*n, {"rms_norm.default", "layer_norm.default", "native_layer_norm.default"})) {
        const std::string input = TensorInput(*n, "input");
        const std::string m = NormModule(*n);
        // Before the head reshape ([B, S, heads x head_dim]) a norm spans every head.
        if (!m.empty() && Rank(input) == 3) out.push_back({m, true, {}, owner, why + "; it normalizes over all heads"});
        next.push_back(input);
      } else if (Is(*n, {"view.default", "reshape.default", "_unsafe_view.default", "unflatten.int",
                         "flatten.using_ints", "transpose.int", "permute.default", "contiguous.default",
                         "clone.default", "to.dtype", "_to_copy.default", "type_as.default", "unsqueeze.default",
                         "squeeze.dim", "alias.default", "detach.default", "slice.Tensor", "select.int",
                         "split_with_sizes.default", "split.Tensor", "chunk.default", "view_as_complex.default",
                         "view_as_real.default", "empty_like.default", "unbind.int", "index.Tensor", "pad.default",
                         "constant_pad_nd.default", "repeat_interleave.self_int", "to.dtype_layout",
                         "sum.dim_IntList"}) ||
                 n->target == "_operator.getitem") {
        // index.Tensor: the rows a mask keeps (Mochi's valid text tokens, `encoder_query[:, :, idx]`)
        // -- its data comes from `self`, the first input; so does a pad's (Sana's linear attention
        // pads its values with a row of ones), and a repeat_interleave's (Cosmos repeats its keys
        // and values for grouped-query attention, once each when the head counts agree), and a
        // sum's (Kandinsky 5 rotates its queries by a product summed over a pair of features).
        const std::vector<std::string> ins = TensorInputs(*n);
        if (!ins.empty()) next.push_back(ins[0]);
      } else if (Is(*n, {"mul.Tensor", "add.Tensor", "sub.Tensor", "neg.default", "cat.default", "stack.default",
                         "addcmul.default", "gelu.default", "silu.default", "tanh.default", "relu.default"})) {
        for (const std::string& in : TensorInputs(*n)) {
          if (!state_input_.count(in)) next.push_back(in);
        }
      }
      for (const std::string& v : next) {
        if (seen.insert(v).second) queue.push_back(v);
      }
    }
  }

  // The Linears that read `value` through reshapes, slices and a division or product (a linear
  // attention's normalization) (rowwise); a concatenation along
  // the features on the way packs the attention's output with another stream, whose Linear is
  // colwise.
  void TraceConsumers(const std::string& value, const std::string& owner, const std::string& why,
                      std::vector<TpModule>& out) {
    std::vector<std::string> queue = {value};
    std::unordered_set<std::string> seen = {value};
    std::vector<int64_t> packed;
    for (size_t at = 0; at < queue.size() && at < kMaxTrace; ++at) {
      for (size_t u : Users(queue[at])) {
        const Node& n = p_.nodes[u];
        std::vector<std::string> next;
        if (Is(n, {"linear.default"})) {
          if (TensorInput(n, "input") != queue[at]) continue;
          const std::string m = LinearModule(n);
          if (!m.empty()) out.push_back({m, false, packed, owner, why});
          continue;
        }
        if (Is(n, {"cat.default"})) {
          const std::vector<std::string> outs = OutputsOf(n);
          const std::vector<std::string> ins = TensorInputs(n);
          const int64_t dim = IntInput(n, "dim").value_or(0);
          const bool features = !outs.empty() && (dim == -1 || dim == Rank(outs[0]) - 1);
          if (!features || !packed.empty()) {
            next = outs;  // the streams joined again along the sequence
          } else {
            std::vector<int64_t> widths;
            for (const std::string& in : ins) {
              const TensorMeta* m = Meta(in);
              if (m == nullptr || m->sizes.empty() || m->sizes.back().symbolic) {
                widths.clear();
                break;
              }
              widths.push_back(m->sizes.back().value);
            }
            if (widths.size() < 2) continue;
            packed = widths;
            for (const std::string& in : ins) {
              if (in != queue[at]) {
                TraceProducers(in, owner, "its output is concatenated with the attention's before `" + outs[0] +
                                              "` reaches a rowwise Linear", out);
              }
            }
            next = outs;
          }
        } else if (Is(n, {"view.default", "reshape.default", "_unsafe_view.default", "flatten.using_ints",
                          "transpose.int", "permute.default", "contiguous.default", "clone.default", "to.dtype",
                          "_to_copy.default", "type_as.default", "slice.Tensor", "split_with_sizes.default",
                          "split.Tensor", "add.Tensor", "pad.default", "constant_pad_nd.default",
                          "div.Tensor", "mul.Tensor"}) ||
                   n.target == "_operator.getitem") {
          next = OutputsOf(n);
        }
        for (const std::string& v : next) {
          if (seen.insert(v).second) queue.push_back(v);
        }
      }
    }
  }

  // The Linear whose output `v` is, through dtype casts and copies, when it reads `input` (the
  // up projection of a gated feed-forward, multiplied with the activated gate); "" otherwise.
  std::string GateOperand(std::string v, const std::string& input) {
    for (int depth = 0; depth < 4; ++depth) {
      const Node* n = Producer(v);
      if (n == nullptr) return "";
      if (Is(*n, {"linear.default"})) return TensorInput(*n, "input") == input ? LinearModule(*n) : "";
      if (!Is(*n, {"to.dtype", "_to_copy.default", "clone.default", "contiguous.default"}) || TensorInputs(*n).empty()) return "";
      v = TensorInputs(*n)[0];
    }
    return "";
  }

  // A feed-forward: Linear A reading tokens whose output reaches Linear B through activations
  // only, B mapping back to A's input width. A gated one (SwiGLU: B(silu(A x) * U x)) has U colwise
  // too: its output meets A's shards in the product, so it is cut the same way (left whole, every
  // rank would compute all of U x to keep its own block).
  void FeedForwards(std::set<std::string>& taken, std::vector<TpModule>& out) {
    for (const Node& a : p_.nodes) {
      if (!Is(a, {"linear.default"})) continue;
      const std::string ma = LinearModule(a);
      const std::string input = TensorInput(a, "input");
      if (ma.empty() || taken.count(ma) || reached_.find(input) == reached_.end()) continue;
      const std::vector<std::string> outs = OutputsOf(a);
      if (outs.empty()) continue;
      std::vector<std::string> queue = {outs[0]};
      std::unordered_set<std::string> seen = {outs[0]};
      std::vector<std::string> gates;  // the other Linears multiplied in on the way (U above)
      for (size_t at = 0; at < queue.size() && at < 16; ++at) {
        for (size_t u : Users(queue[at])) {
          const Node& n = p_.nodes[u];
          if (Is(n, {"mul.Tensor"})) {
            for (const std::string& other : TensorInputs(n)) {
              if (other == queue[at] || seen.count(other)) continue;
              const std::string mu = GateOperand(other, input);
              if (!mu.empty() && mu != ma) gates.push_back(mu);
            }
          }
          if (Is(n, {"linear.default"}) && TensorInput(n, "input") == queue[at]) {
            const std::string mb = LinearModule(n);
            const std::vector<std::string> bo = OutputsOf(n);
            if (mb.empty() || taken.count(mb) || bo.empty()) continue;
            const TensorMeta* ia = Meta(input);
            const TensorMeta* ob = Meta(bo[0]);
            if (ia == nullptr || ob == nullptr || ia->sizes.empty() || ob->sizes.empty() ||
                Key(ia->sizes.back()) != Key(ob->sizes.back())) {
              continue;
            }
            const std::string owner = CommonPrefix(GlobOfPath(ma), GlobOfPath(mb));
            const std::string why = "a feed-forward: `" + ma + "` widens the tokens to " +
                                    std::to_string(Meta(outs[0])->sizes.back().value) + " features, `" + mb +
                                    "` maps them back";
            out.push_back({ma, true, PackedOf(a), owner, why});
            for (const std::string& mu : gates) {
              if (taken.count(mu)) continue;
              out.push_back({mu, true, {}, owner, why + "; `" + mu + "` gates it (their product goes on to `" + mb + "`)"});
              taken.insert(mu);
            }
            out.push_back({mb, false, {}, owner, why});
            taken.insert(ma);
            taken.insert(mb);
            queue.clear();
            break;
          }
          if (Is(n, {"gelu.default", "silu.default", "relu.default", "tanh.default", "sigmoid.default",
                     "mul.Tensor", "to.dtype", "_to_copy.default", "clone.default", "dropout.default",
                     "chunk.default", "split.Tensor", "split_with_sizes.default", "slice.Tensor"}) ||
              n.target == "_operator.getitem") {
            for (const std::string& o : OutputsOf(n)) {
              if (seen.insert(o).second) queue.push_back(o);
            }
          }
        }
      }
    }
  }

  void TensorParallel() {
    std::vector<TpModule> found;
    int64_t heads = 0;
    // Softmax attention, and linear self-attention (its heads as apart as a softmax's: Sana's V^T K
    // sums run per head).
    std::vector<Site> sites = sites_;
    for (const Site& x : linear_sites_) {
      if (x.self && x.heads > 0) sites.push_back(x);
    }
    for (const Site& x : sites) {
      const std::string owner = GlobOfPath(x.module);
      const std::string node = (x.q_token_dim == 3 ? "the linear attention `" : "`") + p_.nodes[x.node].name;
      TraceProducers(x.q, owner, "its output becomes the queries of " + node + "` (heads split over tp)", found);
      TraceProducers(x.k, owner, "its output becomes the keys of " + node + "`", found);
      TraceProducers(x.v, owner, "its output becomes the values of " + node + "`", found);
      TraceConsumers(x.out, owner, "it reads the output of " + node + "` (partial sums all-reduced over tp)", found);
      heads = heads == 0 ? x.heads : std::gcd(heads, x.heads);
    }
    std::set<std::string> taken;
    for (const TpModule& m : found) taken.insert(m.module);
    FeedForwards(taken, found);
    if (found.empty()) {
      s_.tp_dropped = "no Linear produces the attention's queries, keys or values";
      return;
    }
    if (heads % 2 != 0) {
      s_.tp_dropped = "the attention has " + std::to_string(heads) + " heads, which no tp degree of 2 or more splits";
      return;
    }
    // One rule per (glob, style), grouped under its owner, in the order found.
    std::map<std::tuple<std::string, bool, std::vector<int64_t>>, std::vector<std::string>> groups;
    std::map<std::tuple<std::string, bool, std::vector<int64_t>>, std::string> why, owner_of;
    std::vector<std::tuple<std::string, bool, std::vector<int64_t>>> order;
    std::set<std::string> rule_seen;
    std::map<std::string, bool> style_of;
    for (const TpModule& m : found) {
      const std::string glob = GlobOfPath(m.module);
      auto style = style_of.find(glob);
      if (style != style_of.end()) {
        if (style->second != m.colwise) {
          s_.tp_dropped = "`" + glob + "` would be both colwise and rowwise (" + m.why + ")";
          s_.tp.clear();
          return;
        }
        continue;
      }
      style_of[glob] = m.colwise;
      std::string owner = m.owner;
      if (glob.size() <= owner.size() || glob.compare(0, owner.size() + 1, owner + ".") != 0) {
        owner = CommonPrefix(owner, glob);
      }
      if (owner == glob) {  // the module is the owner: group it under its parent
        const size_t dot = glob.rfind('.');
        owner = dot == std::string::npos ? "" : glob.substr(0, dot);
      }
      const auto key = std::make_tuple(owner, m.colwise, m.packed);
      if (!groups.count(key)) {
        order.push_back(key);
        why[key] = m.why;
        owner_of[key] = m.owner;
      }
      groups[key].push_back(owner.empty() ? glob : glob.substr(owner.size() + 1));
    }
    for (const auto& key : order) {
      const auto& [owner, colwise, packed] = key;
      const std::vector<std::string>& rel = groups[key];
      std::string body = rel.size() == 1 ? rel[0] : "{" + Join(rel, ",") + "}";
      SuggestedTp t;
      t.pattern = owner.empty() ? body : owner + "." + body;
      t.colwise = colwise;
      t.packed = packed;
      t.owner = owner_of[key];
      t.why = why[key];
      s_.tp.push_back(std::move(t));
    }
  }

  // ---- Guidance branches ---------------------------------------------------------------------
  void Guidance() {
    if (batch_key_.empty()) {
      s_.cfg_dropped = "the batch is fixed in the program (export with --batch 2 or more to keep it dynamic)";
      // A batch the forward itself fixed (Mochi loops `for idx in range(batch_size)`) stays fixed
      // whatever the export's batch: say where.
      auto first_dim_of_an_input = [](const std::string& size) {  // `hidden_states.shape[0]`
        const std::string_view tail = ".shape[0]";
        return size.size() > tail.size() && size.compare(size.size() - tail.size(), tail.size(), tail) == 0 &&
               std::all_of(size.begin(), size.end() - static_cast<std::ptrdiff_t>(tail.size()),
                           [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
      };
      for (const FixedSize& f : p_.FixedSizes()) {
        if (!first_dim_of_an_input(f.size)) continue;
        s_.cfg_dropped = "the batch is fixed in the program: the forward fixed `" + f.size + "` = " +
                         std::to_string(f.value) + " at " + f.at + (f.code.empty() ? "" : " (`" + f.code + "`)") +
                         ", which no export batch makes dynamic";
        break;
      }
      return;
    }
    const std::vector<CallValues> root = ModuleCallValues(p_, "");
    if (root.empty()) return;
    // The batch the first attention runs over, or -- where the forward folds another dim into it
    // (Latte's tokens or frames: `batch * frames` rows) -- the factor of it that leads the
    // forward's arguments and output.
    std::vector<std::pair<std::string, std::string>> candidates = {{batch_key_, batch_key_}};  // key, as written
    std::set<std::string> factors;  // the batch's symbols, spelled as the guards make them equal
    try {
      for (const std::string& symbol : Expr::Parse(batch_infix_).Symbols()) factors.insert(symbol);
    } catch (const ExprError&) {
    }
    for (const auto& named : NamedTensors(root[0])) {
      const TensorMeta* m = Meta(named.second);
      if (m == nullptr || m->sizes.empty() || !m->sizes[0].symbolic) continue;
      const std::string& spelled = spelling_.Infix(m->sizes[0]);
      if (factors.count(spelled) > 0) candidates.emplace_back(Key(m->sizes[0]), spelled);
    }
    std::string key, why;
    for (const auto& [candidate, written] : candidates) {
      bool argument = false, output = false;
      for (const auto& named : NamedTensors(root[0])) argument = argument || DimKey(named.second, 0) == candidate;
      for (const std::string& o : root[0].outputs) output = output || (!o.empty() && DimKey(o, 0) == candidate);
      if (!argument || !output) continue;
      key = candidate;
      why = "dim 0 is the batch (" + written + ")" +
            (key == batch_key_ ? "" : ", folded into the " + batch_infix_ + " rows") + " that `" + batch_site_ +
            "` attends over";
      break;
    }
    for (const auto& [name, value] : NamedTensors(root[0])) {
      if (key.empty() || Rank(value) == 0 || DimKey(value, 0) != key) continue;
      SuggestedSplit s;
      s.module = "";
      s.argument = name;
      s.dim = 0;
      s.rank = Rank(value);
      s.why = why;
      s_.cfg_splits.push_back(std::move(s));
    }
    for (size_t i = 0; i < root[0].outputs.size(); ++i) {
      const std::string& o = root[0].outputs[i];
      if (key.empty() || o.empty() || Rank(o) == 0 || DimKey(o, 0) != key) continue;
      s_.cfg_gathers.push_back({"", static_cast<int64_t>(i), 0, Rank(o), "the forward's output " + std::to_string(i) +
                                                                              " holds the batch along dim 0"});
    }
    if (s_.cfg_splits.empty() || s_.cfg_gathers.empty()) {
      s_.cfg_splits.clear();
      s_.cfg_gathers.clear();
      s_.cfg_dropped = "no forward argument and output carry the batch along dim 0";
    }
  }

  // ---- Text ----------------------------------------------------------------------------------
  static std::string Join(const std::vector<std::string>& v, const std::string& sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
  }
  // The longest common prefix of two module paths, by whole segments.
  static std::string CommonPrefix(const std::string& a, const std::string& b) {
    size_t end = 0;
    for (size_t i = 0; i <= a.size() && i <= b.size(); ++i) {
      const bool a_end = i == a.size() || a[i] == '.';
      const bool b_end = i == b.size() || b[i] == '.';
      if (a_end && b_end) end = i;
      if (i == a.size() || i == b.size() || a[i] != b[i]) break;
    }
    return a.substr(0, end);
  }
  static std::string PlanName(const std::string& cls) {
    std::string base = cls;
    const size_t t = base.find("Transformer");
    if (t != std::string::npos && t > 0) base = base.substr(0, t);
    std::string name;
    for (char c : base) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "model_" + name;
    return name;
  }

  const Program& p_;
  Suggestion s_;
  std::unordered_map<std::string, std::string> infix_;  // srepr -> SumKey
  SizeSpelling spelling_{p_};
  std::unordered_map<std::string, std::string> same_;   // sizes equal by guards (union-find)
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_map<std::string, std::vector<size_t>> users_;
  std::unordered_set<std::string> state_input_;
  std::unordered_map<std::string, std::string> param_of_;
  std::unordered_set<std::string> leaf_modules_;
  std::vector<Site> sites_;
  std::vector<Site> linear_sites_;  // FindLinearAttention: for the islands only
  std::set<std::string> tokens_;
  std::map<std::string, std::set<std::string>> terms_;  // a joint length -> its streams
  std::string batch_key_, batch_infix_, batch_site_;
  std::unordered_map<std::string, std::vector<Boundary>> boundaries_;
  std::unordered_map<std::string, std::vector<Reached>> reached_;
  std::vector<std::tuple<std::string, int64_t, size_t>> reach_order_;
  std::vector<std::string> source_value_;
};

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

std::string GlobOfPath(const std::string& path) {
  std::string out;
  size_t start = 0;
  bool replaced = false;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    const std::string seg = path.substr(start, dot - start);
    const bool digits = !seg.empty() && std::all_of(seg.begin(), seg.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    out += (start ? "." : "") + (digits && !replaced ? std::string("*") : seg);
    replaced = replaced || digits;
    start = dot + 1;
  }
  return out;
}

bool MergeSiblingSplits(Suggestion& s) {
  // (parent, argument, output, dim, rank) -> (index, source) of each sibling split.
  std::map<std::tuple<std::string, std::string, int64_t, int64_t, int64_t>, std::vector<std::pair<int64_t, size_t>>> groups;
  for (size_t i = 0; i < s.sources.size(); ++i) {
    if (s.sources[i].dropped) continue;
    const SuggestedSplit& x = s.sources[i].at[s.sources[i].current];
    const size_t dot = x.module.rfind('.');
    if (dot == std::string::npos || dot + 1 == x.module.size()) continue;
    const std::string last = x.module.substr(dot + 1);
    if (!std::all_of(last.begin(), last.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
        last.size() > 9) {
      continue;
    }
    groups[{x.module.substr(0, dot), x.argument, x.output, x.dim, x.rank}].emplace_back(std::stoll(last), i);
  }
  bool merged = false;
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end());
    bool contiguous = true;
    for (size_t k = 1; k < members.size(); ++k) contiguous = contiguous && members[k].first == members[k - 1].first + 1;
    if (!contiguous) continue;
    const std::string& parent = std::get<0>(key);
    const int64_t lo = members.front().first, hi = members.back().first;
    // The rule stands where the first of them (in source order) stood.
    size_t first = members.front().second;
    for (const auto& m : members) first = std::min(first, m.second);
    TokenSource& kept = s.sources[first];
    SuggestedSplit x = kept.at[kept.current];
    const std::string one = x.module;
    x.module = parent + ".{" + std::to_string(lo) + ".." + std::to_string(hi) + "}";
    x.why = "one rule for the " + std::to_string(members.size()) + " splits of sibling modules the checks kept; at `" +
            one + "`: " + x.why;
    kept.at = {x};
    kept.current = 0;
    for (const auto& m : members) {
      if (m.second != first) s.sources[m.second].dropped = true;
    }
    merged = true;
  }
  return merged;
}

bool Suggestion::Refused(const SuggestedSplit& x) const {
  return std::find(refused.begin(), refused.end(), std::make_tuple(x.module, x.argument, x.output, x.dim)) != refused.end();
}

void Suggestion::Refuse(const SuggestedSplit& x) {
  if (!Refused(x)) refused.emplace_back(x.module, x.argument, x.output, x.dim);
}

Suggestion SuggestPlan(const Program& program) { return Suggester(program).Run(); }

std::vector<SuggestedSplit> SplitsWhereMade(const Program& program, const std::string& value, int64_t dim) {
  return Suggester(program).WhereMade(value, dim);
}

std::string RenderSuggestion(const Suggestion& s, std::vector<RenderedRule>* rules) {
  std::vector<std::string> lines;
  auto add = [&](const std::string& line) { lines.push_back(line); };
  auto rule = [&](RenderedRule::Kind kind, size_t index, const std::string& line) {
    lines.push_back(line);
    if (rules) rules->push_back({kind, index, static_cast<uint32_t>(lines.size())});
  };
  std::string last_why;  // a reason shared by consecutive rules is written once
  auto comment = [&](const std::string& indent, const std::string& why) {
    if (why == last_why) return;
    last_why = why;
    // Wrapped at ~100 columns, on word bounds.
    std::string line = indent + "#";
    size_t start = 0;
    while (start < why.size()) {
      size_t end = why.find(' ', start);
      if (end == std::string::npos) end = why.size();
      const std::string word = why.substr(start, end - start);
      if (line.size() + 1 + word.size() > 100 && line.size() > indent.size() + 1) {
        add(line);
        line = indent + "#";
      }
      line += " " + word;
      start = end + 1;
    }
    add(line);
  };
  auto split_item = [](const SuggestedSplit& x) {
    return (x.output >= 0 ? "output " + std::to_string(x.output) : x.argument) + " dim " + std::to_string(x.dim) +
           " rank " + std::to_string(x.rank);
  };
  add("# " + s.class_name + ": suggested by `weft suggest` from the program's dataflow, and checked as a written");
  add("# plan is. Review it like code: each rule says which node or input decided it.");
  // Notes that differ only in a block's index or a node's number (the same step refused in each of
  // Latte's 28 blocks) are written once, with how many more there were.
  auto shape_of = [](const std::string& note) {
    std::string key;
    for (size_t i = 0; i < note.size(); ++i) {
      key += note[i];
      if ((note[i] == '.' || note[i] == '_') && i + 1 < note.size() && std::isdigit(static_cast<unsigned char>(note[i + 1]))) {
        while (i + 1 < note.size() && std::isdigit(static_cast<unsigned char>(note[i + 1]))) ++i;
        key += '*';
      }
    }
    return key;
  };
  std::vector<std::pair<std::string, size_t>> notes;  // first of each shape, how many alike
  std::unordered_map<std::string, size_t> shape_index;
  for (const std::string& n : s.notes) {
    auto [it, fresh] = shape_index.emplace(shape_of(n), notes.size());
    if (fresh) notes.push_back({n, 0});
    else ++notes[it->second].second;
  }
  for (const auto& [n, more] : notes) {
    comment("", more == 0 ? n
                          : n + " (and " + std::to_string(more) + " more alike at other blocks or nodes)");
  }
  add("plan " + s.plan_name + " for " + s.class_name);

  std::vector<size_t> live;
  for (size_t i = 0; i < s.sources.size(); ++i) {
    if (!s.sources[i].dropped) live.push_back(i);
  }
  if (!live.empty()) {
    add("");
    add("context_parallel {");
    // Splits of one module in one block, in source order.
    std::vector<std::string> modules;
    for (size_t i : live) {
      const std::string& m = s.sources[i].at[s.sources[i].current].module;
      if (std::find(modules.begin(), modules.end(), m) == modules.end()) modules.push_back(m);
    }
    for (const std::string& m : modules) {
      std::vector<size_t> mine;
      for (size_t i : live) {
        if (s.sources[i].at[s.sources[i].current].module == m) mine.push_back(i);
      }
      if (mine.size() == 1) {
        const SuggestedSplit& x = s.sources[mine[0]].at[s.sources[mine[0]].current];
        comment("  ", x.why);
        rule(RenderedRule::Kind::kSplit, mine[0], "  split " + Quote(m) + " " + split_item(x));
        continue;
      }
      add("  split " + Quote(m) + " {");
      for (size_t i : mine) {
        const SuggestedSplit& x = s.sources[i].at[s.sources[i].current];
        comment("    ", x.why);
        rule(RenderedRule::Kind::kSplit, i, "    " + split_item(x));
      }
      add("  }");
    }
    for (size_t i = 0; i < s.gathers.size(); ++i) {
      const SuggestedGather& g = s.gathers[i];
      comment("  ", g.why);
      rule(RenderedRule::Kind::kGather, i, "  gather " + Quote(g.module) + " output " + std::to_string(g.output) +
                                               " dim " + std::to_string(g.dim) + " rank " + std::to_string(g.rank));
    }
    for (size_t i = 0; i < s.attention.size(); ++i) {
      const SuggestedAttention& a = s.attention[i];
      comment("  ", a.why);
      rule(RenderedRule::Kind::kAttention, i,
           "  attention " + Quote(a.module) + (a.context_parallel ? " context_parallel" : " local"));
    }
    add("}");
  }
  if (!s.tp.empty()) {
    add("");
    add("tensor_parallel {");
    for (size_t i = 0; i < s.tp.size(); ++i) {
      const SuggestedTp& t = s.tp[i];
      comment("  ", t.why);
      std::string line = std::string("  ") + (t.colwise ? "colwise " : "rowwise ") + Quote(t.pattern);
      if (!t.packed.empty()) {
        // In lowest terms: the binder scales proportions to the layer's width, so the same rule
        // serves every config of the class (a GEGLU's halves are [1, 1] at any width).
        int64_t g = 0;
        for (int64_t b : t.packed) g = std::gcd(g, b);
        line += " packed [";
        for (size_t j = 0; j < t.packed.size(); ++j) line += (j ? ", " : "") + std::to_string(t.packed[j] / std::max<int64_t>(g, 1));
        line += "]";
      }
      rule(RenderedRule::Kind::kTp, i, line);
    }
    add("}");
  }
  if (!s.cfg_splits.empty()) {
    add("");
    add("# Guidance branches (cfg axis): the batch carries them (conditional, unconditional ...).");
    add("guidance_parallel {");
    std::vector<std::string> modules;
    for (const SuggestedSplit& x : s.cfg_splits) {
      if (std::find(modules.begin(), modules.end(), x.module) == modules.end()) modules.push_back(x.module);
    }
    for (const std::string& m : modules) {
      add("  split " + Quote(m) + " {");
      for (size_t i = 0; i < s.cfg_splits.size(); ++i) {
        if (s.cfg_splits[i].module != m) continue;
        comment("    ", s.cfg_splits[i].why);
        rule(RenderedRule::Kind::kCfg, i, "    " + split_item(s.cfg_splits[i]));
      }
      add("  }");
    }
    for (size_t i = 0; i < s.cfg_gathers.size(); ++i) {
      const SuggestedGather& g = s.cfg_gathers[i];
      rule(RenderedRule::Kind::kCfg, s.cfg_splits.size() + i,
           "  gather " + Quote(g.module) + " output " + std::to_string(g.output) + " dim 0 rank " + std::to_string(g.rank));
    }
    add("}");
  }
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

}  // namespace weft::program
