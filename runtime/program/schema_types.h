#pragma once

// What an operator's schema argument takes, in the categories the interpreter converts a
// serialized argument into, and the export schema's enums as c10's.

#include <ATen/core/function_schema.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <optional>

#include "compiler/program/program.h"

namespace weft::interp {

struct SchemaType {
  enum class Base : uint8_t {
    kTensor, kTensorList, kInt, kIntList, kFloat, kFloatList, kBool, kBoolList, kScalar, kString, kScalarType,
    kLayout, kMemoryFormat, kDevice, kNone, kOther,
  };
  Base base = Base::kOther;
  bool optional = false;           // T?
  bool optional_elements = false;  // Tensor?[]
};

SchemaType Classify(const c10::Argument& argument);

std::optional<c10::ScalarType> C10ScalarType(program::ScalarType type);
std::optional<c10::Layout> C10Layout(int schema_layout);
std::optional<c10::MemoryFormat> C10MemoryFormat(int schema_format);

}  // namespace weft::interp
