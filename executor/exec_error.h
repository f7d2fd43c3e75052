#pragma once

#include <stdexcept>

namespace weft::exec {

// A failure of the executor at run time, with a message that names the rank, the module fqn
// and the plan line (origin) of the step that failed, like a compile error.
class ExecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace weft::exec
