#pragma once

// ExecutionPlan <-> `weft.plan/1` JSON, its content hash, and a canonical text dump.
// Format: compiler/plan/README.md.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/plan/execution_plan.h"

namespace weft::plan {

// One problem found while reading a plan file: RFC 6901 pointer of the offending value, a
// message, and its line:col in the text (0 when unknown).
struct PlanError {
  std::string pointer;
  std::string message;
  int line = 0;
  int col = 0;
};

struct PlanReadResult {
  std::optional<ExecutionPlan> plan;  // set only when `errors` is empty
  std::vector<PlanError> errors;
};

// Parses a plan document. Unknown fields and unknown enum names are errors; CheckPlan()
// invariants are checked; the stored `content_hash` must equal the hash of the content read
// (a hand-edited plan is refused: recompile it instead).
PlanReadResult ReadPlanJson(std::string_view text, size_t max_errors = 50);

// Reads `path` from disk; an I/O failure is one error with an empty pointer.
PlanReadResult ReadPlanFile(const std::string& path, size_t max_errors = 50);

// `file:line:col: error: message (at /pointer)`.
std::string FormatPlanError(std::string_view file, const PlanError& error);

// The plan as JSON: header fields one per line, one step per line, `content_hash` filled in.
std::string WritePlanJson(const ExecutionPlan& plan);

// The content that is hashed: the whole document without `content_hash`, compact, keys sorted.
std::string CanonicalPlanJson(const ExecutionPlan& plan);

// "sha256:" + hex SHA-256 of CanonicalPlanJson(plan). All ranks must run the same hash.
std::string PlanContentHash(const ExecutionPlan& plan);

// A readable, canonical text form (one line per split, gather, attention, shard and
// collective), used by `weft dump --phase=plan` and golden tests.
std::string DumpPlan(const ExecutionPlan& plan);

// Human-readable byte count: "1.21 GB", "28.3 MB", "512 B" (decimal units, 3 significant digits).
std::string FormatBytes(int64_t bytes);

}  // namespace weft::plan
