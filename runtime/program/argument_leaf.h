#pragma once

// Where one flattened program input sits inside a forward argument given as JSON (an inputs
// file's `weft.args`): list elements by position, object members by the key the program's input
// spec names. Python dicts keep their insertion order, which torch's pytree flattens in, while
// JSON objects here are ordered by key, so an object member is found by its key, never by its
// position (PixArt's `added_cond_kwargs`).

#include <nlohmann/json.hpp>

#include "compiler/program/bindings.h"

namespace weft::interp {

// The value at `leaf`'s place in `arg` (the JSON of argument `leaf.arg`), following `leaf.path`
// ("added_cond_kwargs['resolution']", "img_shapes[0][0][1]") and `leaf.index`; nullptr when the
// caller's value has another structure (the binder names that before anything runs).
const nlohmann::json* ArgumentLeaf(const nlohmann::json& arg, const program::FlatInput& leaf);

}  // namespace weft::interp
