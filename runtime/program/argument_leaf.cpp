#include "runtime/program/argument_leaf.h"

#include <string>

namespace weft::interp {

const nlohmann::json* ArgumentLeaf(const nlohmann::json& arg, const program::FlatInput& leaf) {
  const nlohmann::json* v = &arg;
  size_t pos = leaf.path.compare(0, leaf.arg.size(), leaf.arg) == 0 ? leaf.arg.size() : std::string::npos;
  for (size_t i : leaf.index) {
    // This level's segment of the path: ['key'] names an object member, [n] a position.
    std::string key;
    bool keyed = false;
    if (pos != std::string::npos && leaf.path.compare(pos, 2, "['") == 0) {
      const size_t end = leaf.path.find("']", pos + 2);
      if (end == std::string::npos) {
        pos = std::string::npos;
      } else {
        key = leaf.path.substr(pos + 2, end - pos - 2);
        keyed = true;
        pos = end + 2;
      }
    } else if (pos != std::string::npos && pos < leaf.path.size() && leaf.path[pos] == '[') {
      const size_t end = leaf.path.find(']', pos);
      pos = end == std::string::npos ? std::string::npos : end + 1;
    } else {
      pos = std::string::npos;
    }
    if (v->is_array()) {
      if (i >= v->size()) return nullptr;
      v = &(*v)[i];
    } else if (v->is_object()) {
      if (keyed) {
        auto it = v->find(key);
        if (it == v->end()) return nullptr;
        v = &*it;
      } else {
        if (i >= v->size()) return nullptr;
        auto it = v->begin();
        std::advance(it, static_cast<long>(i));
        v = &*it;
      }
    } else {
      return nullptr;
    }
  }
  return v;
}

}  // namespace weft::interp
