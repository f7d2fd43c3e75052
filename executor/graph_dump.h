#pragma once

// `weft-run --model M:C --dump-graph`: the `weft.graph/1` of a built-in model, made from the
// C++ model itself so that a graph and the model weft runs cannot drift apart. The module tree,
// parameters and attributes come from the C++ module tree; the traces from running the model on
// the meta device (no memory, no weights) in bf16 at each workload of the model's config file
// tools/model_configs/<name>.json, with a hook on every module call and a recording kernel at
// every attention site. The Python side of each class (its module, full forward signature, how
// diffusers calls it) comes from runtime/models/diffusers_types.h. The result equals what
// tools/export_graph.py exports from diffusers for the same config (tests/executor/graph_dump_test).

#include <string>

#include "compiler/model/graph.h"
#include "runtime/models/registry.h"

namespace weft::exec {

// Builds the graph of `spec` at the workloads of `model_config_file` (a tools/model_configs
// JSON: name, source, config with `_class_name`, workloads). Throws std::invalid_argument when the
// file is unreadable or describes a different model than `spec` (naming the differing key), or
// when a workload lacks a size the model needs.
model::ModelGraph DumpModelGraph(const models::ModelSpec& spec, const std::string& model_config_file);

// The structure hash (model::GraphHash) of the graph of `spec`: what a plan compiled for this
// model records, so Install can refuse a plan compiled against another model's graph.
std::string ModelGraphHash(const models::ModelSpec& spec);

// The graph of `spec` when no committed graph describes it (a checkpoint of an unpublished
// config): its tools/model_configs file when there is one, else traced at the model's
// example-input size (models::DefaultWorkload: Flux 1024x1024 with 512 text tokens and Wan
// 832x480x81 for real widths, smaller for small ones).
model::ModelGraph DumpModelGraphForRun(const models::ModelSpec& spec, const std::string& data_dir);

// The graph of `spec` traced at one graph workload (its name and params, e.g. a plan's): the
// shapes weft-run's inputs for that workload give (WorkloadFromGraph). Throws
// std::invalid_argument when the workload lacks a size the model needs.
model::ModelGraph TraceModelGraphAt(const models::ModelSpec& spec, const model::Workload& workload);

// tools/model_configs/<PublishedName(spec)>.json in `data_dir`, or "" when there is none.
std::string ModelConfigFileFor(const models::ModelSpec& spec, const std::string& data_dir);

}  // namespace weft::exec
