#pragma once

// Dataflow facts the interpreter's load-time passes (fusions.h, row_slices.h) match on: who
// produces each tensor, how often it is read, and the metadata checks that read it.

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/program/program.h"

namespace weft::interp {

class Uses {
 public:
  explicit Uses(const program::Program& p);
  // The node producing `value`, if any node does (graph inputs have none).
  std::optional<size_t> Producer(const std::string& value) const;
  // How often `value` is read: by nodes, and once more when it is a program output. torch's
  // training IR checks a tensor's dtype and device before each cast; those checks are no reads.
  size_t Reads(const std::string& value) const;
  // The node producing `value` if it is `target` and `value` is read exactly once.
  std::optional<size_t> SoleProducer(const std::string& value, const char* target) const;
  // The metadata checks of `value`.
  const std::vector<size_t>& Checks(const std::string& value) const;

 private:
  const program::Program& p_;
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_map<std::string, size_t> reads_;
  std::unordered_map<std::string, std::vector<size_t>> checks_;
};

// Node `n`'s argument `name`, nullptr when it has none.
const program::Argument* Input(const program::Node& n, const char* name);
// The tensor that argument names, "" when it is absent or not a tensor.
std::string TensorInput(const program::Node& n, const char* name);
// The node's output when it has exactly one and that is a tensor, else "".
std::string Output(const program::Node& n);

}  // namespace weft::interp
