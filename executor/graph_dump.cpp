#include "executor/graph_dump.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "compiler/model/graph_json.h"
#include "compiler/source/version.h"
#include "executor/plan_loader.h"
#include "runtime/models/diffusers_blocks.h"
#include "runtime/models/diffusers_types.h"
#include "runtime/models/wan.h"
#include "runtime/nn/attention_site.h"
#include "runtime/nn/layers.h"

namespace weft::exec {
namespace {

using Json = nlohmann::ordered_json;

std::string DTypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "f32";
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "f16";
    case at::kDouble: return "f64";
    case at::kLong: return "i64";
    case at::kInt: return "i32";
    case at::kShort: return "i16";
    case at::kChar: return "i8";
    case at::kByte: return "u8";
    case at::kBool: return "bool";
    default: return c10::toString(t);
  }
}

model::Value TensorValue(const at::Tensor& t) {
  return model::Value::Tensor(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), DTypeName(t.scalar_type()));
}

model::Value ValueOf(const nn::Value& v) {
  if (const auto* t = std::get_if<at::Tensor>(&v)) return TensorValue(*t);
  if (const auto* tuple = std::get_if<std::vector<at::Tensor>>(&v)) {
    std::vector<model::Value> elements;
    for (const at::Tensor& t : *tuple) elements.push_back(TensorValue(t));
    return model::Value::Tuple(std::move(elements));
  }
  return model::Value::None();
}

// What one forward records: every module call (in completion order per module, as Python's
// forward hooks see them) and the q/k/v of every attention call.
struct Recording {
  std::vector<std::string> call_order;  // module paths by first completed call
  std::unordered_map<std::string, std::vector<model::Call>> calls;
  std::vector<std::string> site_order;
  std::unordered_map<std::string, std::vector<model::AttentionCall>> attention;
};

// Records each call of the module it is installed on, bound to the Python signature.
class RecordingHook : public nn::Hook {
 public:
  explicit RecordingHook(Recording& out) : out_(out) {}
  void PostForward(nn::Module& module, const nn::Args& args, nn::Outputs& outputs) override {
    const models::PythonType& type = models::PythonTypeOf(module);
    model::Call call;
    for (const models::PythonArg& arg : type.args) {
      if (args.Has(arg.name)) {
        call.args.emplace_back(arg.name, ValueOf(args.Get(arg.name)));
      } else if (arg.name == "return_dict" && module.fqn().empty()) {
        // The exporter calls the model with return_dict=False; weft's models return tuples.
        call.args.emplace_back(arg.name, model::Value::Scalar("false"));
      }
    }
    for (const auto& [name, value] : args.entries()) {
      if (call.FindArg(name) == nullptr) {
        throw std::invalid_argument("module `" + module.fqn() + "` (" + module.type() + ") was called with `" + name +
                                    "`, which its Python signature lacks");
      }
    }
    call.positional = std::min<int64_t>(type.positional, static_cast<int64_t>(call.args.size()));
    for (const nn::Value& v : outputs) call.outputs.push_back(ValueOf(v));
    auto [it, inserted] = out_.calls.try_emplace(module.fqn());
    if (inserted) out_.call_order.push_back(module.fqn());
    it->second.push_back(std::move(call));
  }

 private:
  Recording& out_;
};

// Stands in for an attention site's kernel on the meta device: records q/k/v, returns the
// output's shape.
class RecordingKernel : public nn::AttentionKernel {
 public:
  RecordingKernel(Recording& out, std::string site) : out_(out), site_(std::move(site)) {}
  at::Tensor Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>&) override {
    auto shape = [](const at::Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); };
    auto [it, inserted] = out_.attention.try_emplace(site_);
    if (inserted) out_.site_order.push_back(site_);
    it->second.push_back({shape(q), shape(k), shape(v)});
    return at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  }
  std::string Name() const override { return "record"; }

 private:
  Recording& out_;
  std::string site_;
};

// The inputs tools/export_graph.py's make_inputs builds for the class at a workload (bf16, on
// the meta device), in the order it passes them. Sizes in latent units come from the workload's
// pixels and frames as weft-run sizes its inputs (WorkloadFromGraph).
std::vector<std::pair<std::string, at::Tensor>> MetaInputs(const std::string& family, const Json& config,
                                                           const model::Workload& w) {
  auto require = [&](const char* key) {
    if (!w.IntParam(key)) throw std::invalid_argument("workload " + w.name + " has no integer `" + key + "`");
  };
  require("height");
  require("width");
  if (family == "wan") require("frames");
  const models::Workload sizes = WorkloadFromGraph(family, w);
  const int64_t b = w.IntParam("batch").value_or(1);
  const int64_t text = w.IntParam("text_len").value_or(512);
  auto bf16 = at::TensorOptions().dtype(at::kBFloat16).device(at::kMeta);
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(at::kMeta);
  auto width = [&](const char* key) { return config.at(key).get<int64_t>(); };
  std::vector<std::pair<std::string, at::Tensor>> in;
  if (family == "flux") {
    const int64_t n = sizes.height * sizes.width;
    in.emplace_back("hidden_states", at::empty({b, n, width("in_channels")}, bf16));
    in.emplace_back("encoder_hidden_states", at::empty({b, text, width("joint_attention_dim")}, bf16));
    in.emplace_back("pooled_projections", at::empty({b, width("pooled_projection_dim")}, bf16));
    in.emplace_back("timestep", at::empty({b}, bf16));
    in.emplace_back("img_ids", at::empty({n, 3}, f32));
    in.emplace_back("txt_ids", at::empty({text, 3}, f32));
    if (config.at("guidance_embeds").get<bool>()) in.emplace_back("guidance", at::empty({b}, bf16));
    return in;
  }
  in.emplace_back("hidden_states",
                  at::empty({b, width("in_channels"), sizes.frames, sizes.height, sizes.width}, bf16));
  in.emplace_back("timestep", at::empty({b}, bf16));
  in.emplace_back("encoder_hidden_states", at::empty({b, text, width("text_dim")}, bf16));
  if (config.at("image_dim").is_number_integer()) {
    in.emplace_back("encoder_hidden_states_image",
                    at::empty({b, w.IntParam("image_len").value_or(257), width("image_dim")}, bf16));
  }
  return in;
}

// The named values plans may use (tools/export_graph.py derived_config).
std::vector<std::pair<std::string, int64_t>> DerivedConfig(const std::string& class_name, const Json& config) {
  std::vector<std::pair<std::string, int64_t>> d;
  auto integer = [&](const char* key) -> std::optional<int64_t> {
    auto it = config.find(key);
    if (it == config.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  const int64_t heads = *integer("num_attention_heads");
  const int64_t head_dim = *integer("attention_head_dim");
  d.emplace_back("num_attention_heads", heads);
  d.emplace_back("attention_head_dim", head_dim);
  d.emplace_back("inner_dim", heads * head_dim);
  d.emplace_back("hidden_size", heads * head_dim);
  for (const char* key : {"num_layers", "num_single_layers", "ffn_dim", "in_channels", "out_channels",
                          "joint_attention_dim", "text_dim", "image_dim", "added_kv_proj_dim", "pooled_projection_dim"}) {
    if (auto v = integer(key)) d.emplace_back(key, *v);
  }
  if (class_name == "FluxTransformer2DModel") d.emplace_back("mlp_hidden_dim", heads * head_dim * 4);
  if (auto ffn = integer("ffn_dim")) d.emplace_back("mlp_hidden_dim", *ffn);
  return d;
}

std::vector<std::pair<std::string, model::Attr>> AttrsOf(nn::Module& m) {
  std::vector<std::pair<std::string, model::Attr>> a;
  if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
    a.emplace_back("bias", model::Attr::Bool(linear->has_bias()));
    a.emplace_back("in_features", model::Attr::Int(linear->in_features()));
    a.emplace_back("out_features", model::Attr::Int(linear->out_features()));
    if (!linear->packed_row_blocks().empty()) {
      a.emplace_back("tp_packed_row_blocks", model::Attr::IntList(linear->packed_row_blocks()));
    }
  }
  if (auto* conv = dynamic_cast<models::Conv3d*>(&m)) {
    const at::IntArrayRef w = conv->Parameter("weight").sizes();
    a.emplace_back("in_channels", model::Attr::Int(w[1]));
    a.emplace_back("kernel_size", model::Attr::IntList({w[2], w[3], w[4]}));
    a.emplace_back("out_channels", model::Attr::Int(w[0]));
    a.emplace_back("stride", model::Attr::IntList(conv->stride()));
  }
  if (auto* attention = dynamic_cast<nn::AttentionModule*>(&m)) {
    a.emplace_back("heads", model::Attr::Int(attention->heads()));
  }
  return a;
}

Json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read model config `" + path + "`");
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("config") || !j["config"].is_object() ||
      !j.contains("workloads") || !j["workloads"].is_array()) {
    throw std::invalid_argument(path + ": not a model config (an object with `config` and `workloads`)");
  }
  return j;
}


// An attention site as the exporter classifies it: joint when the module projects a second
// stream (add_q_proj), cross when its first traced call passed encoder_hidden_states, else
// self. `first_call` is null for a site no workload ran (then `traced` is false).
model::AttentionSite SiteOf(const nn::AttentionModule& a, const model::Call* first_call, int64_t head_dim) {
  model::AttentionSite s;
  s.path = a.fqn();
  s.heads = a.heads();
  s.head_dim = head_dim;
  s.traced = first_call != nullptr;
  const model::Value* encoder = first_call ? first_call->FindArg("encoder_hidden_states") : nullptr;
  if (a.Child("add_q_proj") != nullptr) {
    s.kind = model::AttentionKind::kJoint;
    s.q_inputs = s.kv_inputs = {"hidden_states", "encoder_hidden_states"};
  } else if (encoder != nullptr && encoder->kind != model::Value::Kind::kNone) {
    s.kind = model::AttentionKind::kCross;
    s.q_inputs = {"hidden_states"};
    s.kv_inputs = {"encoder_hidden_states"};
  } else {
    s.kind = model::AttentionKind::kSelf;
    s.q_inputs = s.kv_inputs = {"hidden_states"};
  }
  return s;
}

// The graph of `model` (of `family`) traced at `workloads` (name and params; their traces are
// filled in). Consumes the model: its parameters become bf16 on the meta device and its
// attention sites keep the recording kernel.
model::ModelGraph BuildModelGraph(nn::Module& model, const std::string& family, std::vector<model::Workload> workloads,
                                  const std::string& graph_name, const std::string& source) {
  const auto [class_name, config_text] = models::DiffusersConfigOf(model);
  const Json config = Json::parse(config_text);
  model::ModelGraph g;
  g.name = graph_name;
  g.class_name = class_name;
  g.source = source;
  g.model_config_json = config.dump();
  g.producer = {{"tool", "weft-run --dump-graph"}, {"weft", std::string(kVersion)}, {"torch", TORCH_VERSION}};
  g.config = DerivedConfig(class_name, config);

  // The module tree, in bf16 like the exporter's model.to(torch.bfloat16).
  std::set<std::string> typed;  // a class's first module defines its entry, as in the exporter
  model.Walk([&](nn::Module& m) {
    const models::PythonType& pt = models::PythonTypeOf(m);
    if (typed.insert(pt.name).second) {
      model::ModuleType t;
      t.name = pt.name;
      t.python_module = pt.python_module;
      for (const models::PythonArg& a : pt.args) t.args.push_back({a.name, a.optional, a.keyword_only});
      t.variadic = pt.variadic;
      g.types.push_back(std::move(t));
    }
    model::Module mod;
    mod.path = m.fqn();
    mod.type = m.type();
    if (dynamic_cast<nn::ModuleList*>(&m) != nullptr) mod.container = model::Container::kList;
    for (const auto& [name, child] : m.children()) mod.children.push_back(name);
    for (const auto& [name, tensor] : m.parameters()) {
      mod.params.push_back({name, std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end()), "bf16", false});
    }
    for (const auto& [name, shape] : m.declared_buffers()) mod.params.push_back({name, shape, "bf16", true});
    mod.attrs = AttrsOf(m);
    g.modules.push_back(std::move(mod));
  });
  for (auto& [name, slot] : model.NamedParameters()) {
    *slot = at::empty(slot->sizes(), at::TensorOptions().dtype(at::kBFloat16).device(at::kMeta));
  }
  model.Walk([](nn::Module& m) { m.CastBuffers(at::kBFloat16); });

  std::map<std::string, std::set<int64_t>> output_counts;  // type -> outputs seen
  std::vector<nn::AttentionModule*> attention_modules;
  model.Walk([&](nn::Module& m) {
    if (auto* a = dynamic_cast<nn::AttentionModule*>(&m)) attention_modules.push_back(a);
  });
  std::unordered_map<std::string, model::AttentionSite> sites;
  for (model::Workload& workload : workloads) {
    Recording rec;
    model.Walk([&](nn::Module& m) { m.AddHook(std::make_shared<RecordingHook>(rec)); });
    for (nn::AttentionModule* a : attention_modules) a->SetKernel(std::make_shared<RecordingKernel>(rec, a->fqn()));
    nn::Args args;
    for (auto& [name, tensor] : MetaInputs(family, config, workload)) args.Set(name, tensor);
    {
      c10::InferenceMode guard;
      nn::Call(model, std::move(args));
    }
    model.Walk([](nn::Module& m) { m.ClearHooks(); });

    for (const std::string& path : rec.call_order) {
      workload.calls.push_back({path, rec.calls[path]});
      for (const model::Call& c : rec.calls[path]) {
        output_counts[model.Find(path)->type()].insert(static_cast<int64_t>(c.outputs.size()));
      }
    }
    for (const std::string& site : rec.site_order) workload.attention.push_back({site, rec.attention[site]});
    g.workloads.push_back(workload);

    for (nn::AttentionModule* a : attention_modules) {
      auto recorded = rec.attention.find(a->fqn());
      if (recorded != rec.attention.end() && sites.count(a->fqn()) == 0) {
        sites.emplace(a->fqn(), SiteOf(*a, &rec.calls.at(a->fqn()).front(), recorded->second.front().q.at(3)));
      }
    }
  }
  for (nn::AttentionModule* a : attention_modules) {
    auto it = sites.find(a->fqn());
    g.attention_sites.push_back(it != sites.end() ? it->second : SiteOf(*a, nullptr, a->head_dim()));
  }
  for (model::ModuleType& t : g.types) {
    auto it = output_counts.find(t.name);
    if (it != output_counts.end() && it->second.size() == 1) t.num_outputs = *it->second.begin();
  }
  g.Reindex();
  return g;
}

// The graph of `spec` traced at one workload of `sizes` (latent units). Wan I2V's attention
// reads the last 512 context tokens as text, so it gets 512 text tokens and 257 image tokens.
model::ModelGraph TraceAt(const models::ModelSpec& spec, models::Workload sizes, const std::string& graph_name,
                          const std::string& source) {
  std::unique_ptr<nn::Module> model = models::CreateModel(spec);
  const bool i2v = Json::parse(models::DiffusersConfigOf(*model).second).value("image_dim", Json()).is_number_integer();
  if (i2v) sizes.text = models::kWanTextContextLength;
  model::Workload workload = GraphWorkloadFor(spec.family, sizes);
  if (i2v) workload.params.emplace_back("image_len", "257");
  return BuildModelGraph(*model, spec.family, {workload}, graph_name, source);
}

}  // namespace

model::ModelGraph DumpModelGraph(const models::ModelSpec& spec, const std::string& model_config_file) {
  const Json file = ReadJsonFile(model_config_file);
  std::unique_ptr<nn::Module> model = models::CreateModel(spec);
  // The file's config must describe this model: build it and compare full configs.
  const Json config = Json::parse(models::DiffusersConfigOf(*model).second);
  const models::ModelSpec from_file = models::SpecFromConfigJson(file["config"].dump(), model_config_file);
  const Json file_config = Json::parse(models::DiffusersConfigOf(*models::CreateModel(from_file)).second);
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (file_config.at(it.key()) != it.value()) {
      throw std::invalid_argument(model_config_file + " describes a different model than " + spec.ToString() + ": `" +
                                  it.key() + "` is " + file_config.at(it.key()).dump() + " there but " +
                                  it.value().dump() + " in " + spec.ToString());
    }
  }
  std::vector<model::Workload> workloads;
  for (const Json& w : file["workloads"]) {
    model::Workload workload;
    workload.name = w.value("name", std::string());
    for (auto it = w.begin(); it != w.end(); ++it) {
      if (it.key() != "name") workload.params.emplace_back(it.key(), nlohmann::json(it.value()).dump());
    }
    workloads.push_back(std::move(workload));
  }
  return BuildModelGraph(*model, spec.family, std::move(workloads), file.value("name", models::PublishedName(spec)),
                         file.value("source", std::string()));
}

std::string ModelConfigFileFor(const models::ModelSpec& spec, const std::string& data_dir) {
  const std::string path = data_dir + "/tools/model_configs/" + models::PublishedName(spec) + ".json";
  return std::filesystem::exists(path) ? path : "";
}

model::ModelGraph DumpModelGraphForRun(const models::ModelSpec& spec, const std::string& data_dir) {
  const std::string file = ModelConfigFileFor(spec, data_dir);
  if (!file.empty()) return DumpModelGraph(spec, file);
  return TraceAt(spec, models::DefaultWorkload(*models::CreateModel(spec)), models::PublishedName(spec),
                 "traced by weft-run from the model " + spec.ToString());
}

model::ModelGraph TraceModelGraphAt(const models::ModelSpec& spec, const model::Workload& workload) {
  std::unique_ptr<nn::Module> model = models::CreateModel(spec);
  return BuildModelGraph(*model, spec.family, {workload}, models::PublishedName(spec),
                         "traced by weft-run from the model " + spec.ToString());
}

std::string ModelGraphHash(const models::ModelSpec& spec) {
  // The hash covers structure only, not traces, so the smallest input that runs every site does.
  models::Workload smallest;
  smallest.frames = 1;
  smallest.height = smallest.width = 2;
  smallest.text = 2;
  return model::GraphHash(TraceAt(spec, smallest, spec.ToString(), ""));
}

}  // namespace weft::exec
