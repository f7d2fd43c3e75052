#include "compiler/plan/plan_json.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "compiler/source/json_locator.h"
#include "compiler/source/sha256.h"

namespace weft::plan {
namespace {

using OJson = nlohmann::ordered_json;  // output order for people
using Json = nlohmann::json;           // sorted keys: the hashed form

std::string Child(const std::string& ptr, std::string_view key) { return source::JsonPointerChild(ptr, key); }
std::string Child(const std::string& ptr, size_t index) { return source::JsonPointerChild(ptr, index); }

// ---------------------------------------------------------------------------------------------
// To JSON

template <typename J = OJson>
J OriginJson(const Origin& o) {
  J j;
  j["file"] = o.file;
  j["line"] = o.line;
  j["col"] = o.col;
  if (o.derived) j["derived"] = true;
  return j;
}

template <typename J = OJson>
J SplitJson(const Split& s) {
  J j;
  j["target"] = std::string(SplitTargetName(s.target));
  if (s.target == Split::Target::kArgument) {
    j["argument"] = s.argument;
    if (s.element >= 0) j["element"] = s.element;
  } else {
    j["output"] = s.output;
  }
  j["dim"] = s.dim;
  j["rank"] = s.rank;
  if (s.optional) j["optional"] = true;
  j["global_size"] = s.global_size;
  j["sizes"] = s.sizes;
  j["uneven"] = s.uneven;
  if (s.group != kCpGroup) j["group"] = s.group;
  j["origin"] = OriginJson<J>(s.origin);
  return j;
}

template <typename J = OJson>
J GatherJson(const Gather& g) {
  J j;
  j["output"] = g.output;
  j["dim"] = g.dim;
  j["rank"] = g.rank;
  j["global_size"] = g.global_size;
  j["sizes"] = g.sizes;
  j["uneven"] = g.uneven;
  if (g.group != kCpGroup) j["group"] = g.group;
  j["origin"] = OriginJson<J>(g.origin);
  return j;
}

template <typename J = OJson>
J AttentionJson(const Attention& a) {
  J j;
  j["mode"] = std::string(AttentionModeName(a.mode));
  j["heads"] = a.heads;
  j["head_dim"] = a.head_dim;
  j["local_heads"] = a.local_heads;
  j["head_pad"] = a.head_pad;
  j["ulysses"] = a.ulysses;
  j["ring"] = a.ring;
  j["uneven_sequence"] = a.uneven_sequence;
  j["rotate_method"] = std::string(RotateMethodName(a.rotate_method));
  j["convert_to_fp32"] = a.convert_to_fp32;
  j["q_len"] = a.q_len;
  j["kv_len"] = a.kv_len;
  if (a.pair_mask) j["pair_mask"] = true;  // written only when set: plans without one keep their hash
  if (a.linear) j["linear"] = true;
  j["origin"] = OriginJson<J>(a.origin);
  return j;
}

template <typename J = OJson>
J TpJson(const TensorParallel& t) {
  J j;
  j["style"] = std::string(ShardStyleName(t.style));
  j["blocks"] = t.blocks;
  J params = J::array();
  for (const ParamShard& p : t.params) {
    J pj;
    pj["name"] = p.name;
    pj["dim"] = p.dim;
    pj["blocks"] = p.blocks;
    pj["full_shape"] = p.full_shape;
    pj["local_shape"] = p.local_shape;
    params.push_back(std::move(pj));
  }
  j["params"] = std::move(params);
  j["all_reduce_output"] = t.all_reduce_output;
  j["origin"] = OriginJson<J>(t.origin);
  return j;
}

template <typename J = OJson>
J CollectivesJson(const std::vector<Collective>& cs) {
  J arr = J::array();
  for (const Collective& c : cs) {
    J j;
    j["op"] = std::string(CollectiveOpName(c.op));
    j["axis"] = c.axis;
    j["count"] = c.count;
    j["bytes"] = c.bytes;
    arr.push_back(std::move(j));
  }
  return arr;
}

template <typename J = OJson>
J StepJson(const ModuleStep& s) {
  J j;
  j["module"] = s.module;
  j["calls"] = s.calls;
  if (!s.splits.empty()) {
    J a = J::array();
    for (const Split& x : s.splits) a.push_back(SplitJson<J>(x));
    j["splits"] = std::move(a);
  }
  if (!s.gathers.empty()) {
    J a = J::array();
    for (const Gather& x : s.gathers) a.push_back(GatherJson<J>(x));
    j["gathers"] = std::move(a);
  }
  if (s.attention) j["attention"] = AttentionJson<J>(*s.attention);
  if (s.tp) j["tp"] = TpJson<J>(*s.tp);
  J cost;
  cost["collectives"] = CollectivesJson<J>(s.cost.collectives);
  cost["weight_bytes"] = s.cost.weight_bytes;
  cost["activation_bytes"] = s.cost.activation_bytes;
  j["cost"] = std::move(cost);
  return j;
}

template <typename J = OJson>
J EditJson(const ProgramEdit& e) {
  J j;
  j["kind"] = std::string(ProgramEditKindName(e.kind));
  if (!e.value.empty()) j["value"] = e.value;
  if (!e.node.empty()) j["node"] = e.node;
  if (e.kind == ProgramEdit::Kind::kSplit) {
    j["scope"] = e.scope;
    if (e.after_producer) j["after_producer"] = true;
    if (!e.parts.empty()) j["parts"] = e.parts;
    if (!e.unit.empty()) j["unit"] = e.unit;
    if (!e.rows.empty()) j["rows"] = e.rows;
    if (!e.unit.empty() || !e.rows.empty()) j["min_rows"] = e.min_rows;
  }
  if (e.kind == ProgramEdit::Kind::kSplit || e.kind == ProgramEdit::Kind::kGather) {
    j["dim"] = e.dim;
    j["rank"] = e.rank;
    j["uneven"] = e.uneven;
    if (e.group != kCpGroup) j["group"] = e.group;
  }
  if (e.kind == ProgramEdit::Kind::kArgument) {
    if (!e.value.empty()) j["dim"] = e.dim;
    j["argument"] = e.argument;
    j["element"] = e.element;
    j["new_value"] = e.new_value;
  }
  if (e.kind == ProgramEdit::Kind::kAttention && e.uneven) j["uneven"] = true;
  // An attention's pair mask over a joint sequence: the streams' lengths it is reordered by.
  if (e.kind == ProgramEdit::Kind::kAttention && !e.parts.empty()) j["parts"] = e.parts;
  // An attention over a joint sequence with streams every rank holds whole: where they lie.
  if (e.kind == ProgramEdit::Kind::kAttention && !e.whole_parts.empty()) {
    J held = J::array();
    for (const WholePart& w : e.whole_parts) {
      J x;
      x["value"] = w.value;
      x["dim"] = w.dim;
      x["at"] = w.at;
      held.push_back(std::move(x));
    }
    j["whole_parts"] = std::move(held);
  }
  if (e.kind == ProgramEdit::Kind::kAllReduce) {
    j["bias"] = e.bias;
    // A rowwise Linear's sum is over tp (the group left out); a linear attention's over the CP group.
    if (e.group != kTpAxis) j["group"] = e.group;
    if (e.new_value != 0) j["new_value"] = e.new_value;
  }
  if (e.kind == ProgramEdit::Kind::kNormStats) j["new_value"] = e.new_value;
  if (e.kind == ProgramEdit::Kind::kHalo) {
    j["dim"] = e.dim;
    j["new_value"] = e.new_value;
  }
  if (e.attention) j["attention"] = AttentionJson<J>(*e.attention);
  j["module"] = e.module;
  j["origin"] = OriginJson<J>(e.origin);
  return j;
}

template <typename J = OJson>
J ProgramJson(const ProgramEdits& p) {
  J j;
  j["file"] = p.program;
  j["hash"] = p.program_hash;
  J edits = J::array();
  for (const ProgramEdit& e : p.edits) edits.push_back(EditJson<J>(e));
  j["edits"] = std::move(edits);
  return j;
}

// Header sections in document order (everything but `steps` and `content_hash`).
std::vector<std::pair<std::string, OJson>> HeaderJson(const ExecutionPlan& p) {
  std::vector<std::pair<std::string, OJson>> out;
  out.emplace_back("format", std::string(kPlanFormat));
  out.emplace_back("version", p.version);
  OJson plan;
  plan["name"] = p.plan_name;
  plan["file"] = p.plan_file;
  out.emplace_back("plan", std::move(plan));
  OJson model;
  model["class_name"] = p.model_class;
  model["graph"] = p.graph_name;
  model["graph_hash"] = p.graph_hash;
  out.emplace_back("model", std::move(model));
  OJson mesh;
  OJson axes = OJson::array();
  for (const MeshAxis& a : p.mesh.axes) axes.push_back(OJson{{"name", a.name}, {"size", a.size}});
  mesh["axes"] = std::move(axes);
  mesh["world_size"] = p.mesh.world_size;
  mesh["ulysses_anything"] = p.mesh.ulysses_anything;
  mesh["ring_anything"] = p.mesh.ring_anything;
  mesh["rotate_method"] = std::string(RotateMethodName(p.mesh.rotate_method));
  mesh["convert_to_fp32"] = p.mesh.convert_to_fp32;
  if (!p.mesh.weight_axes.empty()) mesh["weight_axes"] = p.mesh.weight_axes;
  out.emplace_back("mesh", std::move(mesh));
  OJson workload;
  workload["name"] = p.workload.name;
  OJson params = OJson::object();
  for (const auto& [k, v] : p.workload.params) params[k] = OJson::parse(v, nullptr, false);
  workload["params"] = std::move(params);
  out.emplace_back("workload", std::move(workload));
  OJson cost;
  OJson per_axis = OJson::array();
  for (const AxisTraffic& t : p.cost.per_axis) {
    per_axis.push_back(OJson{{"axis", t.axis}, {"collectives", t.collectives}, {"bytes", t.bytes}});
  }
  cost["per_axis"] = std::move(per_axis);
  cost["collectives"] = p.cost.collectives;
  cost["bytes"] = p.cost.bytes;
  cost["weight_bytes"] = p.cost.weight_bytes;
  if (p.cost.weight_buffer_bytes != 0) cost["weight_buffer_bytes"] = p.cost.weight_buffer_bytes;
  cost["activation_bytes"] = p.cost.activation_bytes;
  out.emplace_back("cost", std::move(cost));
  if (p.program) out.emplace_back("program", ProgramJson(*p.program));
  if (p.weights) {
    OJson w;
    w["ranks"] = p.weights->ranks;
    OJson blocks = OJson::array();
    for (const WeightBlock& b : p.weights->blocks) {
      OJson j;
      j["module"] = b.module;
      j["params"] = b.params;
      j["shapes"] = b.shapes;
      j["dtypes"] = b.dtypes;
      j["offsets"] = b.offsets;
      j["bytes"] = b.bytes;
      j["slice_bytes"] = b.slice_bytes;
      blocks.push_back(std::move(j));
    }
    w["blocks"] = std::move(blocks);
    out.emplace_back("weights", std::move(w));
  }
  if (p.guidance_calls) {
    OJson g;
    g["arguments"] = p.guidance_calls->arguments;
    g["branches"] = p.guidance_calls->branches;
    g["per_group"] = p.guidance_calls->per_group;
    g["output_bytes"] = p.guidance_calls->output_bytes;
    g["origin"] = OriginJson<OJson>(p.guidance_calls->origin);
    out.emplace_back("guidance_calls", std::move(g));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// From JSON

class Reader {
 public:
  Reader(std::vector<PlanError>& errors, size_t max_errors) : errors_(errors), max_(max_errors) {}

  void Error(const std::string& ptr, std::string message) {
    if (errors_.size() < max_) errors_.push_back({ptr, std::move(message), 0, 0});
  }

  static std::string TypeName(const OJson& j) {
    if (j.is_null()) return "null";
    if (j.is_object()) return "an object";
    if (j.is_array()) return "an array";
    if (j.is_string()) return "a string";
    if (j.is_boolean()) return "a boolean";
    if (j.is_number_integer()) return "an integer";
    return "a number";
  }

  bool Object(const OJson& j, const std::string& ptr) {
    if (j.is_object()) return true;
    Error(ptr, "expected an object, found " + TypeName(j));
    return false;
  }
  bool Array(const OJson& j, const std::string& ptr) {
    if (j.is_array()) return true;
    Error(ptr, "expected an array, found " + TypeName(j));
    return false;
  }

  void Keys(const OJson& obj, const std::string& ptr, std::initializer_list<std::string_view> allowed) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "`" : ", `") + std::string(a) + "`";
      Error(Child(ptr, it.key()), "unknown field `" + it.key() + "`; expected one of " + list);
    }
  }

  const OJson* Field(const OJson& obj, std::string_view key, const std::string& ptr, bool required = true) {
    auto it = obj.find(std::string(key));
    if (it == obj.end()) {
      if (required) Error(ptr, "missing required field `" + std::string(key) + "`");
      return nullptr;
    }
    return &*it;
  }

  void Str(const OJson& obj, std::string_view key, const std::string& ptr, std::string& out, bool required = true) {
    const OJson* j = Field(obj, key, ptr, required);
    if (!j) return;
    if (!j->is_string()) {
      Error(Child(ptr, key), "expected a string, found " + TypeName(*j));
      return;
    }
    out = j->get<std::string>();
  }

  template <typename T>
  void Int(const OJson& obj, std::string_view key, const std::string& ptr, T& out, bool required = true) {
    const OJson* j = Field(obj, key, ptr, required);
    if (!j) return;
    if (!j->is_number_integer()) {
      Error(Child(ptr, key), "expected an integer, found " + TypeName(*j));
      return;
    }
    out = static_cast<T>(j->get<int64_t>());
  }

  void Bool(const OJson& obj, std::string_view key, const std::string& ptr, bool& out, bool required = true) {
    const OJson* j = Field(obj, key, ptr, required);
    if (!j) return;
    if (!j->is_boolean()) {
      Error(Child(ptr, key), "expected true or false, found " + TypeName(*j));
      return;
    }
    out = j->get<bool>();
  }

  void Ints(const OJson& obj, std::string_view key, const std::string& ptr, std::vector<int64_t>& out,
            bool required = true) {
    const OJson* j = Field(obj, key, ptr, required);
    if (!j) return;
    const std::string p = Child(ptr, key);
    if (!Array(*j, p)) return;
    out.clear();
    for (size_t i = 0; i < j->size(); ++i) {
      if (!(*j)[i].is_number_integer()) {
        Error(Child(p, i), "expected an integer, found " + TypeName((*j)[i]));
        continue;
      }
      out.push_back((*j)[i].get<int64_t>());
    }
  }

  // An array of strings; `what` names an element for the error on one that is not.
  void Strs(const OJson& obj, std::string_view key, const std::string& ptr, std::vector<std::string>& out,
            const char* what, bool required = true) {
    const OJson* j = Field(obj, key, ptr, required);
    if (!j) return;
    const std::string p = Child(ptr, key);
    if (!Array(*j, p)) return;
    out.clear();
    for (size_t i = 0; i < j->size(); ++i) {
      if ((*j)[i].is_string()) {
        out.push_back((*j)[i].get<std::string>());
      } else {
        Error(Child(p, i), std::string("expected ") + what);
      }
    }
  }

  template <typename E, typename Parse>
  void Enum(const OJson& obj, std::string_view key, const std::string& ptr, E& out, Parse parse,
            const char* expected) {
    std::string name;
    Str(obj, key, ptr, name);
    if (name.empty() && !obj.contains(std::string(key))) return;
    if (auto v = parse(name)) {
      out = *v;
    } else {
      Error(Child(ptr, key), "unknown " + std::string(key) + " `" + name + "`; expected " + expected);
    }
  }

  // A split's or gather's group: absent = the CP group, else "cfg"; a program edit may also be
  // over "tp" (a split: a whole value sliced where it meets tp-sharded heads; an all-reduce).
  void Group(const OJson& obj, const std::string& ptr, std::string& out, bool tp_too = false) {
    Str(obj, "group", ptr, out, false);
    if (out != kCpGroup && out != kCfgAxis && !(tp_too && out == kTpAxis)) {
      Error(Child(ptr, "group"), "unknown group `" + out + "`; expected `cp` (the default)" +
                                     std::string(tp_too ? ", `cfg` or `tp`" : " or `cfg`"));
    }
  }

  void ReadOrigin(const OJson& obj, const std::string& ptr, Origin& o) {
    const OJson* j = Field(obj, "origin", ptr);
    if (!j) return;
    const std::string p = Child(ptr, "origin");
    if (!Object(*j, p)) return;
    Keys(*j, p, {"file", "line", "col", "derived"});
    Str(*j, "file", p, o.file);
    Int(*j, "line", p, o.line);
    Int(*j, "col", p, o.col);
    Bool(*j, "derived", p, o.derived, false);
  }

 private:
  std::vector<PlanError>& errors_;
  size_t max_;
};

void ReadAttention(Reader& r, const OJson& x, const std::string& xp, Attention& a) {
  if (!r.Object(x, xp)) return;
  r.Keys(x, xp, {"mode", "heads", "head_dim", "local_heads", "head_pad", "ulysses", "ring", "uneven_sequence",
                 "rotate_method", "convert_to_fp32", "q_len", "kv_len", "pair_mask", "linear", "origin"});
  r.Enum(x, "mode", xp, a.mode, ParseAttentionMode, "`local`, `ulysses`, `ring` or `usp`");
  r.Int(x, "heads", xp, a.heads);
  r.Int(x, "head_dim", xp, a.head_dim);
  r.Int(x, "local_heads", xp, a.local_heads);
  r.Int(x, "head_pad", xp, a.head_pad);
  r.Int(x, "ulysses", xp, a.ulysses);
  r.Int(x, "ring", xp, a.ring);
  r.Bool(x, "uneven_sequence", xp, a.uneven_sequence);
  r.Enum(x, "rotate_method", xp, a.rotate_method, ParseRotateMethod, "`allgather` or `p2p`");
  r.Bool(x, "convert_to_fp32", xp, a.convert_to_fp32);
  r.Int(x, "q_len", xp, a.q_len);
  r.Int(x, "kv_len", xp, a.kv_len);
  if (x.contains("pair_mask")) r.Bool(x, "pair_mask", xp, a.pair_mask);
  if (x.contains("linear")) r.Bool(x, "linear", xp, a.linear);
  r.ReadOrigin(x, xp, a.origin);
}

void ReadProgram(Reader& r, const OJson& j, ProgramEdits& out) {
  const std::string p = "/program";
  if (!r.Object(j, p)) return;
  r.Keys(j, p, {"file", "hash", "edits"});
  r.Str(j, "file", p, out.program);
  r.Str(j, "hash", p, out.program_hash);
  const OJson* edits = r.Field(j, "edits", p);
  if (edits == nullptr || !r.Array(*edits, p + "/edits")) return;
  for (size_t i = 0; i < edits->size(); ++i) {
    const std::string ep = Child(p + "/edits", i);
    const OJson& e = (*edits)[i];
    if (!r.Object(e, ep)) continue;
    r.Keys(e, ep, {"kind", "value", "node", "scope", "after_producer", "dim", "rank", "uneven", "group", "argument",
                   "element", "new_value", "bias", "parts", "unit", "rows", "min_rows", "whole_parts", "attention", "module",
                   "origin"});
    ProgramEdit edit;
    r.Enum(e, "kind", ep, edit.kind, ParseProgramEditKind,
           "`split`, `gather`, `attention`, `all_reduce`, `argument`, `norm_stats` or `halo`");
    r.Str(e, "value", ep, edit.value, false);
    r.Str(e, "node", ep, edit.node, false);
    r.Str(e, "scope", ep, edit.scope, false);
    r.Bool(e, "after_producer", ep, edit.after_producer, false);
    r.Int(e, "dim", ep, edit.dim, false);
    r.Int(e, "rank", ep, edit.rank, false);
    r.Bool(e, "uneven", ep, edit.uneven, false);
    r.Group(e, ep, edit.group, /*tp_too=*/true);
    if (edit.kind == ProgramEdit::Kind::kAllReduce && !e.contains("group")) edit.group = std::string(kTpAxis);
    if (edit.group == kTpAxis && edit.kind != ProgramEdit::Kind::kSplit && edit.kind != ProgramEdit::Kind::kAllReduce) {
      r.Error(Child(ep, "group"), "group `tp` is for splits and all-reduces only");
    }
    r.Str(e, "argument", ep, edit.argument, false);
    r.Int(e, "element", ep, edit.element, false);
    r.Int(e, "new_value", ep, edit.new_value, false);
    r.Str(e, "bias", ep, edit.bias, false);
    r.Strs(e, "parts", ep, edit.parts, "the name of a symbolic int", false);
    r.Strs(e, "unit", ep, edit.unit, "the name of a symbolic int or an integer", false);
    r.Str(e, "rows", ep, edit.rows, false);
    r.Int(e, "min_rows", ep, edit.min_rows, false);
    if (const OJson* held = r.Field(e, "whole_parts", ep, false); held != nullptr && r.Array(*held, Child(ep, "whole_parts"))) {
      for (size_t w = 0; w < held->size(); ++w) {
        const std::string wp = Child(Child(ep, "whole_parts"), w);
        const OJson& x = (*held)[w];
        if (!r.Object(x, wp)) continue;
        r.Keys(x, wp, {"value", "dim", "at"});
        WholePart part;
        r.Str(x, "value", wp, part.value);
        r.Int(x, "dim", wp, part.dim);
        r.Str(x, "at", wp, part.at);
        if (part.at != "q_before" && part.at != "q_after" && part.at != "kv_before" && part.at != "kv_after") {
          r.Error(wp + "/at", "`" + part.at + "` is not one of q_before, q_after, kv_before, kv_after");
        }
        edit.whole_parts.push_back(std::move(part));
      }
    }
    if (const OJson* a = r.Field(e, "attention", ep, false)) {
      Attention at;
      ReadAttention(r, *a, Child(ep, "attention"), at);
      edit.attention = at;
    }
    r.Str(e, "module", ep, edit.module);
    r.ReadOrigin(e, ep, edit.origin);
    out.edits.push_back(std::move(edit));
  }
}

void ReadWeightBlock(Reader& r, const OJson& x, const std::string& bp, WeightBlock& b) {
  if (!r.Object(x, bp)) return;
  r.Keys(x, bp, {"module", "params", "shapes", "dtypes", "offsets", "bytes", "slice_bytes"});
  r.Str(x, "module", bp, b.module);
  r.Strs(x, "params", bp, b.params, "a parameter name");
  if (const OJson* shapes = r.Field(x, "shapes", bp)) {
    const std::string sp = Child(bp, "shapes");
    if (r.Array(*shapes, sp)) {
      for (size_t k = 0; k < shapes->size(); ++k) {
        b.shapes.emplace_back();
        const OJson& shape = (*shapes)[k];
        if (!r.Array(shape, Child(sp, k))) continue;
        for (size_t d = 0; d < shape.size(); ++d) {
          if (shape[d].is_number_integer()) {
            b.shapes.back().push_back(shape[d].get<int64_t>());
          } else {
            r.Error(Child(Child(sp, k), d), "expected an integer");
          }
        }
      }
    }
  }
  r.Strs(x, "dtypes", bp, b.dtypes, "a dtype name");
  r.Ints(x, "offsets", bp, b.offsets);
  r.Int(x, "bytes", bp, b.bytes);
  r.Int(x, "slice_bytes", bp, b.slice_bytes);
  if (b.shapes.size() != b.params.size() || b.dtypes.size() != b.params.size() || b.offsets.size() != b.params.size()) {
    r.Error(bp, "one shape, dtype and offset per parameter");
  }
}

void ReadWeights(Reader& r, const OJson& j, WeightPlacement& w) {
  if (!r.Object(j, "/weights")) return;
  r.Keys(j, "/weights", {"ranks", "blocks"});
  r.Int(j, "ranks", "/weights", w.ranks);
  if (const OJson* blocks = r.Field(j, "blocks", "/weights")) {
    if (r.Array(*blocks, "/weights/blocks")) {
      w.blocks.resize(blocks->size());
      for (size_t i = 0; i < blocks->size(); ++i) ReadWeightBlock(r, (*blocks)[i], Child("/weights/blocks", i), w.blocks[i]);
    }
  }
}

void ReadGuidanceCalls(Reader& r, const OJson& j, GuidanceCalls& g) {
  const std::string p = "/guidance_calls";
  if (!r.Object(j, p)) return;
  r.Keys(j, p, {"arguments", "branches", "per_group", "output_bytes", "origin"});
  r.Strs(j, "arguments", p, g.arguments, "an argument name");
  r.Int(j, "branches", p, g.branches);
  r.Ints(j, "per_group", p, g.per_group);
  r.Int(j, "output_bytes", p, g.output_bytes);
  r.ReadOrigin(j, p, g.origin);
  int64_t sum = 0;
  for (int64_t n : g.per_group) sum += n < 0 ? 0 : n;
  if (g.per_group.empty() || sum != g.branches) r.Error(p + "/per_group", "the groups' calls must add up to `branches`");
}

void ReadStep(Reader& r, const OJson& j, const std::string& p, ModuleStep& s) {
  if (!r.Object(j, p)) return;
  r.Keys(j, p, {"module", "calls", "splits", "gathers", "attention", "tp", "cost"});
  r.Str(j, "module", p, s.module);
  r.Int(j, "calls", p, s.calls);
  if (const OJson* a = r.Field(j, "splits", p, false)) {
    const std::string ap = Child(p, "splits");
    if (r.Array(*a, ap)) {
      for (size_t i = 0; i < a->size(); ++i) {
        const OJson& x = (*a)[i];
        const std::string xp = Child(ap, i);
        if (!r.Object(x, xp)) continue;
        r.Keys(x, xp, {"target", "argument", "element", "output", "dim", "rank", "optional", "global_size",
                       "sizes", "uneven", "group", "origin"});
        Split sp;
        std::string target;
        r.Str(x, "target", xp, target);
        if (target == "argument") {
          sp.target = Split::Target::kArgument;
          r.Str(x, "argument", xp, sp.argument);
          r.Int(x, "element", xp, sp.element, false);
          if (x.contains("output")) r.Error(Child(xp, "output"), "an argument split has no `output`");
        } else if (target == "output") {
          sp.target = Split::Target::kOutput;
          r.Int(x, "output", xp, sp.output);
          if (x.contains("argument")) r.Error(Child(xp, "argument"), "an output split has no `argument`");
        } else if (x.contains("target")) {
          r.Error(Child(xp, "target"), "unknown split target `" + target + "`; expected `argument` or `output`");
        }
        r.Int(x, "dim", xp, sp.dim);
        r.Int(x, "rank", xp, sp.rank);
        r.Bool(x, "optional", xp, sp.optional, false);
        r.Int(x, "global_size", xp, sp.global_size);
        r.Ints(x, "sizes", xp, sp.sizes);
        r.Bool(x, "uneven", xp, sp.uneven);
        r.Group(x, xp, sp.group);
        r.ReadOrigin(x, xp, sp.origin);
        s.splits.push_back(std::move(sp));
      }
    }
  }
  if (const OJson* a = r.Field(j, "gathers", p, false)) {
    const std::string ap = Child(p, "gathers");
    if (r.Array(*a, ap)) {
      for (size_t i = 0; i < a->size(); ++i) {
        const OJson& x = (*a)[i];
        const std::string xp = Child(ap, i);
        if (!r.Object(x, xp)) continue;
        r.Keys(x, xp, {"output", "dim", "rank", "global_size", "sizes", "uneven", "group", "origin"});
        Gather g;
        r.Int(x, "output", xp, g.output);
        r.Int(x, "dim", xp, g.dim);
        r.Int(x, "rank", xp, g.rank);
        r.Int(x, "global_size", xp, g.global_size);
        r.Ints(x, "sizes", xp, g.sizes);
        r.Bool(x, "uneven", xp, g.uneven);
        r.Group(x, xp, g.group);
        r.ReadOrigin(x, xp, g.origin);
        s.gathers.push_back(std::move(g));
      }
    }
  }
  if (const OJson* x = r.Field(j, "attention", p, false)) {
    Attention a;
    ReadAttention(r, *x, Child(p, "attention"), a);
    s.attention = std::move(a);
  }
  if (const OJson* x = r.Field(j, "tp", p, false)) {
    const std::string xp = Child(p, "tp");
    if (r.Object(*x, xp)) {
      r.Keys(*x, xp, {"style", "blocks", "params", "all_reduce_output", "origin"});
      TensorParallel t;
      r.Enum(*x, "style", xp, t.style, ParseShardStyle,
             "`colwise`, `rowwise`, `replicate`, `packed_colwise` or `packed_rowwise`");
      r.Ints(*x, "blocks", xp, t.blocks);
      if (const OJson* ps = r.Field(*x, "params", xp)) {
        const std::string pp = Child(xp, "params");
        if (r.Array(*ps, pp)) {
          for (size_t i = 0; i < ps->size(); ++i) {
            const OJson& q = (*ps)[i];
            const std::string qp = Child(pp, i);
            if (!r.Object(q, qp)) continue;
            r.Keys(q, qp, {"name", "dim", "blocks", "full_shape", "local_shape"});
            ParamShard ps1;
            r.Str(q, "name", qp, ps1.name);
            r.Int(q, "dim", qp, ps1.dim);
            r.Ints(q, "blocks", qp, ps1.blocks);
            r.Ints(q, "full_shape", qp, ps1.full_shape);
            r.Ints(q, "local_shape", qp, ps1.local_shape);
            t.params.push_back(std::move(ps1));
          }
        }
      }
      r.Bool(*x, "all_reduce_output", xp, t.all_reduce_output);
      r.ReadOrigin(*x, xp, t.origin);
      s.tp = std::move(t);
    }
  }
  if (const OJson* c = r.Field(j, "cost", p)) {
    const std::string cp = Child(p, "cost");
    if (r.Object(*c, cp)) {
      r.Keys(*c, cp, {"collectives", "weight_bytes", "activation_bytes"});
      r.Int(*c, "weight_bytes", cp, s.cost.weight_bytes);
      r.Int(*c, "activation_bytes", cp, s.cost.activation_bytes);
      if (const OJson* cs = r.Field(*c, "collectives", cp)) {
        const std::string csp = Child(cp, "collectives");
        if (r.Array(*cs, csp)) {
          for (size_t i = 0; i < cs->size(); ++i) {
            const OJson& q = (*cs)[i];
            const std::string qp = Child(csp, i);
            if (!r.Object(q, qp)) continue;
            r.Keys(q, qp, {"op", "axis", "count", "bytes"});
            Collective col;
            r.Enum(q, "op", qp, col.op, ParseCollectiveOp, "`all_to_all`, `all_gather`, `all_reduce` or `send_recv`");
            r.Str(q, "axis", qp, col.axis);
            r.Int(q, "count", qp, col.count);
            r.Int(q, "bytes", qp, col.bytes);
            s.cost.collectives.push_back(std::move(col));
          }
        }
      }
    }
  }
}

}  // namespace

std::string CanonicalPlanJson(const ExecutionPlan& plan) {
  // The compact dump of the sorted document, written piecewise (plans reach 10^3 steps):
  // header sections in sorted key order, with `steps` in its place.
  std::vector<std::pair<std::string, Json>> sections;
  for (auto& [key, value] : HeaderJson(plan)) sections.emplace_back(key, Json(value));
  sections.emplace_back("steps", Json());
  std::sort(sections.begin(), sections.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "{";
  for (size_t i = 0; i < sections.size(); ++i) {
    out += (i ? ",\"" : "\"") + sections[i].first + "\":";
    if (sections[i].first != "steps") {
      out += sections[i].second.dump();
      continue;
    }
    out += "[";
    for (size_t k = 0; k < plan.steps.size(); ++k) out += (k ? "," : "") + StepJson<Json>(plan.steps[k]).dump();
    out += "]";
  }
  return out + "}";
}

std::string PlanContentHash(const ExecutionPlan& plan) {
  return "sha256:" + source::Sha256Hex(CanonicalPlanJson(plan));
}

std::string WritePlanJson(const ExecutionPlan& plan) {
  std::ostringstream out;
  out << "{\n";
  const auto header = HeaderJson(plan);
  out << "  \"format\": " << header[0].second.dump() << ",\n";
  out << "  \"version\": " << header[1].second.dump() << ",\n";
  out << "  \"content_hash\": " << OJson(PlanContentHash(plan)).dump() << ",\n";
  for (size_t i = 2; i < header.size(); ++i) {
    out << "  " << OJson(header[i].first).dump() << ": " << header[i].second.dump() << ",\n";
  }
  out << "  \"steps\": [";
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    out << (i ? ",\n    " : "\n    ") << StepJson(plan.steps[i]).dump();
  }
  out << (plan.steps.empty() ? "]\n" : "\n  ]\n");
  out << "}\n";
  return out.str();
}

PlanReadResult ReadPlanJson(std::string_view text, size_t max_errors) {
  PlanReadResult result;
  OJson doc;
  try {
    doc = OJson::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    PlanError err;
    std::string what = e.what();
    const size_t colon = what.find("]: ");
    err.message = "malformed JSON: " + (colon == std::string::npos ? what : what.substr(colon + 3));
    source::JsonLineCol(text, e.byte > 0 ? e.byte - 1 : 0, err.line, err.col);
    result.errors.push_back(std::move(err));
    return result;
  }
  Reader r(result.errors, max_errors);
  ExecutionPlan p;
  std::string stored_hash;
  if (r.Object(doc, "")) {
    r.Keys(doc, "", {"format", "version", "content_hash", "plan", "model", "mesh", "workload", "cost", "steps", "program",
                     "weights", "guidance_calls"});
    std::string format;
    r.Str(doc, "format", "", format);
    if (doc.contains("format") && format != kPlanFormat) {
      r.Error("/format", "unsupported plan format `" + format + "`; this reader reads `" + std::string(kPlanFormat) + "`");
    }
    r.Int(doc, "version", "", p.version);
    r.Str(doc, "content_hash", "", stored_hash);
    if (const OJson* j = r.Field(doc, "plan", "")) {
      if (r.Object(*j, "/plan")) {
        r.Keys(*j, "/plan", {"name", "file"});
        r.Str(*j, "name", "/plan", p.plan_name);
        r.Str(*j, "file", "/plan", p.plan_file);
      }
    }
    if (const OJson* j = r.Field(doc, "model", "")) {
      if (r.Object(*j, "/model")) {
        r.Keys(*j, "/model", {"class_name", "graph", "graph_hash"});
        r.Str(*j, "class_name", "/model", p.model_class);
        r.Str(*j, "graph", "/model", p.graph_name);
        r.Str(*j, "graph_hash", "/model", p.graph_hash);
      }
    }
    if (const OJson* j = r.Field(doc, "mesh", "")) {
      if (r.Object(*j, "/mesh")) {
        r.Keys(*j, "/mesh",
               {"axes", "world_size", "ulysses_anything", "ring_anything", "rotate_method", "convert_to_fp32", "weight_axes"});
        if (const OJson* axes = r.Field(*j, "axes", "/mesh")) {
          if (r.Array(*axes, "/mesh/axes")) {
            for (size_t i = 0; i < axes->size(); ++i) {
              const std::string ap = Child("/mesh/axes", i);
              if (!r.Object((*axes)[i], ap)) continue;
              r.Keys((*axes)[i], ap, {"name", "size"});
              MeshAxis a;
              r.Str((*axes)[i], "name", ap, a.name);
              r.Int((*axes)[i], "size", ap, a.size);
              p.mesh.axes.push_back(std::move(a));
            }
          }
        }
        r.Int(*j, "world_size", "/mesh", p.mesh.world_size);
        r.Bool(*j, "ulysses_anything", "/mesh", p.mesh.ulysses_anything);
        r.Bool(*j, "ring_anything", "/mesh", p.mesh.ring_anything);
        r.Enum(*j, "rotate_method", "/mesh", p.mesh.rotate_method, ParseRotateMethod, "`allgather` or `p2p`");
        r.Bool(*j, "convert_to_fp32", "/mesh", p.mesh.convert_to_fp32);
        if (const OJson* axes = r.Field(*j, "weight_axes", "/mesh", false)) {
          if (r.Array(*axes, "/mesh/weight_axes")) {
            for (size_t i = 0; i < axes->size(); ++i) {
              const std::string ap = Child("/mesh/weight_axes", i);
              if (!(*axes)[i].is_string() || ((*axes)[i] != kCpGroup && (*axes)[i] != kCfgAxis)) {
                r.Error(ap, "expected `cp` or `cfg`");
                continue;
              }
              p.mesh.weight_axes.push_back((*axes)[i].get<std::string>());
            }
          }
        }
      }
    }
    if (const OJson* j = r.Field(doc, "workload", "")) {
      if (r.Object(*j, "/workload")) {
        r.Keys(*j, "/workload", {"name", "params"});
        r.Str(*j, "name", "/workload", p.workload.name);
        if (const OJson* params = r.Field(*j, "params", "/workload", false)) {
          if (r.Object(*params, "/workload/params")) {
            for (auto it = params->begin(); it != params->end(); ++it) {
              p.workload.params.emplace_back(it.key(), Json(it.value()).dump());
            }
          }
        }
      }
    }
    if (const OJson* j = r.Field(doc, "cost", "")) {
      if (r.Object(*j, "/cost")) {
        r.Keys(*j, "/cost", {"per_axis", "collectives", "bytes", "weight_bytes", "weight_buffer_bytes", "activation_bytes"});
        if (const OJson* axes = r.Field(*j, "per_axis", "/cost")) {
          if (r.Array(*axes, "/cost/per_axis")) {
            for (size_t i = 0; i < axes->size(); ++i) {
              const std::string ap = Child("/cost/per_axis", i);
              if (!r.Object((*axes)[i], ap)) continue;
              r.Keys((*axes)[i], ap, {"axis", "collectives", "bytes"});
              AxisTraffic t;
              r.Str((*axes)[i], "axis", ap, t.axis);
              r.Int((*axes)[i], "collectives", ap, t.collectives);
              r.Int((*axes)[i], "bytes", ap, t.bytes);
              p.cost.per_axis.push_back(std::move(t));
            }
          }
        }
        r.Int(*j, "collectives", "/cost", p.cost.collectives);
        r.Int(*j, "bytes", "/cost", p.cost.bytes);
        r.Int(*j, "weight_bytes", "/cost", p.cost.weight_bytes);
        r.Int(*j, "weight_buffer_bytes", "/cost", p.cost.weight_buffer_bytes, false);
        r.Int(*j, "activation_bytes", "/cost", p.cost.activation_bytes);
      }
    }
    if (const OJson* j = r.Field(doc, "weights", "", false)) {
      p.weights.emplace();
      ReadWeights(r, *j, *p.weights);
    }
    if (const OJson* j = r.Field(doc, "guidance_calls", "", false)) {
      p.guidance_calls.emplace();
      ReadGuidanceCalls(r, *j, *p.guidance_calls);
    }
    if (const OJson* j = r.Field(doc, "program", "", false)) {
      p.program.emplace();
      ReadProgram(r, *j, *p.program);
    }
    if (const OJson* j = r.Field(doc, "steps", "")) {
      if (r.Array(*j, "/steps")) {
        p.steps.resize(j->size());
        for (size_t i = 0; i < j->size(); ++i) ReadStep(r, (*j)[i], Child("/steps", i), p.steps[i]);
      }
    }
  }
  if (result.errors.empty()) {
    for (std::string& problem : CheckPlan(p)) r.Error("", std::move(problem));
  }
  if (result.errors.empty()) {
    const std::string actual = PlanContentHash(p);
    if (actual != stored_hash) {
      r.Error("/content_hash", "content hash " + stored_hash + " does not match the content (" + actual +
                                   "); the plan was edited after compilation, compile it again");
    }
  }
  if (!result.errors.empty()) {
    const source::JsonLocator locator(text);
    for (PlanError& e : result.errors) {
      if (e.line == 0) locator.LineCol(e.pointer, e.line, e.col);
    }
    return result;
  }
  result.plan = std::move(p);
  return result;
}

PlanReadResult ReadPlanFile(const std::string& path, size_t max_errors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    PlanReadResult r;
    r.errors.push_back({"", "cannot open plan file `" + path + "`", 0, 0});
    return r;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return ReadPlanJson(buffer.str(), max_errors);
}

std::string FormatPlanError(std::string_view file, const PlanError& error) {
  std::string out(file);
  if (error.line > 0) out += ":" + std::to_string(error.line) + ":" + std::to_string(error.col);
  out += ": error: " + error.message + " (at " + (error.pointer.empty() ? std::string("/") : error.pointer) + ")";
  return out;
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(bytes < 0 ? -bytes : bytes);
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%s%lld B", bytes < 0 ? "-" : "", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%s%.*f %s", bytes < 0 ? "-" : "", v < 10 ? 2 : (v < 100 ? 1 : 0), v, units[u]);
  }
  return buf;
}

namespace {

std::string Ints(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

// "[1024 x4]" for equal sizes, the full list otherwise.
std::string Sizes(const std::vector<int64_t>& v) {
  if (!v.empty() && std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v[0]; })) {
    return "[" + std::to_string(v[0]) + " x" + std::to_string(v.size()) + "]";
  }
  return Ints(v);
}

}  // namespace

std::string DumpPlan(const ExecutionPlan& p) {
  std::ostringstream out;
  out << "plan " << p.plan_name << " (" << p.plan_file << ") for " << p.model_class << "\n";
  out << "graph " << p.graph_name << " " << p.graph_hash << "\n";
  out << "mesh " << p.mesh.ToString() << " world=" << p.mesh.world_size
      << " rotate=" << RotateMethodName(p.mesh.rotate_method) << (p.mesh.convert_to_fp32 ? " fp32-merge" : "")
      << (p.mesh.ulysses_anything ? " ulysses-anything" : "") << (p.mesh.ring_anything ? " ring-anything" : "")
      << "\n";
  out << "workload " << p.workload.name << "\n";
  for (const ModuleStep& s : p.steps) {
    out << "step `" << s.module << "` calls=" << s.calls << "\n";
    for (const Split& x : s.splits) {
      out << "  split ";
      if (x.target == Split::Target::kArgument) {
        out << "argument " << x.argument;
        if (x.element >= 0) out << "[" << x.element << "]";
      } else {
        out << "output " << x.output;
      }
      out << " dim " << x.dim << " rank " << x.rank << (x.optional ? " optional" : "") << ": " << x.global_size
          << " -> " << Sizes(x.sizes) << (x.uneven ? " uneven" : "") << (x.group != kCpGroup ? " over " + x.group : "")
          << "  @ " << x.origin.ToString() << "\n";
    }
    for (const Gather& g : s.gathers) {
      out << "  gather output " << g.output << " dim " << g.dim << " rank " << g.rank << ": " << Sizes(g.sizes)
          << " -> " << g.global_size << (g.uneven ? " uneven" : "") << (g.group != kCpGroup ? " over " + g.group : "")
          << "  @ " << g.origin.ToString() << "\n";
    }
    if (s.attention) {
      const Attention& a = *s.attention;
      out << "  attention " << AttentionModeName(a.mode) << " ulysses=" << a.ulysses << " ring=" << a.ring
          << " heads=" << a.heads << " local_heads=" << a.local_heads;
      if (a.head_pad) out << " head_pad=" << a.head_pad;
      out << " head_dim=" << a.head_dim << " q=" << a.q_len << " kv=" << a.kv_len;
      if (a.mode == AttentionMode::kRing || a.mode == AttentionMode::kUsp) {
        out << " rotate=" << RotateMethodName(a.rotate_method) << (a.convert_to_fp32 ? " fp32" : "");
      }
      out << (a.uneven_sequence ? " uneven" : "") << (a.pair_mask ? " pair-mask" : "") << (a.linear ? " linear" : "") << "  @ " << a.origin.ToString() << "\n";
    }
    if (s.tp) {
      const TensorParallel& t = *s.tp;
      out << "  tp " << ShardStyleName(t.style) << " blocks=" << Ints(t.blocks)
          << (t.all_reduce_output ? " all_reduce" : "") << "  @ " << t.origin.ToString() << "\n";
      for (const ParamShard& q : t.params) {
        out << "    " << q.name << " " << Ints(q.full_shape) << " -> " << Ints(q.local_shape);
        if (q.dim >= 0) out << " dim " << q.dim;
        out << "\n";
      }
    }
    for (const Collective& c : s.cost.collectives) {
      out << "  cost " << CollectiveOpName(c.op) << " " << c.axis << " x" << c.count << " " << c.bytes << " B\n";
    }
  }
  if (p.guidance_calls) {
    const GuidanceCalls& g = *p.guidance_calls;
    out << "guidance calls: " << g.branches << " branches over cfg=" << g.per_group.size() << " (" << Ints(g.per_group)
        << " per group), per branch:";
    for (const std::string& a : g.arguments) out << " " << a;
    out << "; " << g.output_bytes << " B of output each  @ " << g.origin.ToString() << "\n";
  }
  out << "cost per forward: " << p.cost.collectives << " collectives, " << p.cost.bytes << " B ("
      << FormatBytes(p.cost.bytes) << ") per rank\n";
  for (const AxisTraffic& t : p.cost.per_axis) {
    out << "  " << t.axis << ": " << t.collectives << " collectives, " << t.bytes << " B (" << FormatBytes(t.bytes)
        << ")\n";
  }
  out << "memory per rank: weights " << p.cost.weight_bytes << " B (" << FormatBytes(p.cost.weight_bytes)
      << "), activations " << p.cost.activation_bytes << " B (" << FormatBytes(p.cost.activation_bytes) << ")\n";
  return out.str();
}

}  // namespace weft::plan
