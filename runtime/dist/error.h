#pragma once

#include <stdexcept>
#include <string>

namespace weft::dist {

// The one exception type of runtime/dist. Thrown for a bad environment or mesh, a failed
// rendezvous, and any failed or timed-out collective. what() is a complete, user-facing
// sentence that names the rank and, for collectives, the axis, the collective, the group's
// ranks and the tensor shapes, e.g.
//   rank 2: all_to_all on axis `ulysses` (group ranks 2,3) with input [2, 8, 4, 16]
//   failed after 5003 ms (timeout 5000 ms): <backend message> (a peer may have exited)
class DistError : public std::runtime_error {
 public:
  explicit DistError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace weft::dist
