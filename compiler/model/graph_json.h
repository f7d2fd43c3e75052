#pragma once

// Reading and writing `weft.graph/1` JSON (format: compiler/model/README.md), and the graph
// hash that an ExecutionPlan records and the executor compares.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/model/graph.h"

namespace weft::model {

// One problem found while reading a graph file. `pointer` is the RFC 6901 JSON pointer of the
// offending value ("" for the whole document); `line`/`col` (1-based) locate it in the text
// (0 when unknown).
struct GraphError {
  std::string pointer;
  std::string message;
  int line = 0;
  int col = 0;
};

struct GraphReadResult {
  std::optional<ModelGraph> graph;  // set only when `errors` is empty
  std::vector<GraphError> errors;
};

// Parses and validates a graph document. Unknown fields are errors (the format is closed; a
// new field means a new format version). Compressed paths (`{a..b}`) are expanded, modules are
// put in pre-order, and CheckGraph() runs. Every problem is reported, not just the first
// (capped at `max_errors`).
GraphReadResult ReadGraphJson(std::string_view text, size_t max_errors = 50);

// Reads `path` from disk; an I/O failure is reported as an error with an empty pointer.
GraphReadResult ReadGraphFile(const std::string& path, size_t max_errors = 50);

// `file:line:col: error: message (at /json/pointer)` (line/col left out when unknown).
std::string FormatGraphError(std::string_view file, const GraphError& error);

// The graph as a `weft.graph/1` document in the exporter's layout: one module, site or traced
// module per line, list items with equal content merged into `{a..b}` patterns. Reading the
// result gives back an equal graph.
std::string WriteGraphJson(const ModelGraph& graph);

// The hashed part of the graph as compact canonical JSON (sorted keys, expanded paths, modules
// in pre-order): class name, named config values, forward signatures (without the Python
// module or output counts), modules (parameters without dtypes) and attention sites. Names,
// provenance, dtypes and workload traces are left out, so a graph exported from diffusers and
// one dumped by weft-run for the same architecture hash alike, and a new workload does not
// change the hash.
std::string CanonicalGraphJson(const ModelGraph& graph);

// "sha256:" + hex SHA-256 of CanonicalGraphJson(graph). ModelGraph::Hash() is the memoised
// form.
std::string GraphHash(const ModelGraph& graph);

}  // namespace weft::model
