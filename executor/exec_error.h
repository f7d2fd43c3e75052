#pragma once

#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>

namespace weft::exec {

// A failure of the executor at run time, with a message that names the rank, the module fqn
// and the plan line (origin) of the step that failed, like a compile error.
class ExecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An exception's message for a user: LibTorch's own text without the C++ backtrace c10 appends
// to what() (some 50 frames), anything else's what().
inline std::string ErrorText(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace weft::exec
