#include "runtime/program/schema_types.h"

#include <ATen/core/jit_type.h>

namespace weft::interp {

SchemaType Classify(const c10::Argument& argument) {
  SchemaType t;
  c10::TypePtr type = argument.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    t.optional = true;
    type = type->expectRef<c10::OptionalType>().getElementType();
  }
  using K = c10::TypeKind;
  using B = SchemaType::Base;
  switch (type->kind()) {
    case K::TensorType: t.base = B::kTensor; break;
    case K::IntType: case K::SymIntType: t.base = B::kInt; break;
    case K::FloatType: case K::SymFloatType: t.base = B::kFloat; break;
    case K::NumberType: t.base = B::kScalar; break;
    case K::BoolType: case K::SymBoolType: t.base = B::kBool; break;
    case K::StringType: t.base = B::kString; break;
    case K::ScalarTypeType: t.base = B::kScalarType; break;
    case K::LayoutType: t.base = B::kLayout; break;
    case K::MemoryFormatType: t.base = B::kMemoryFormat; break;
    case K::DeviceObjType: t.base = B::kDevice; break;
    case K::NoneType: t.base = B::kNone; break;
    case K::ListType: {
      c10::TypePtr elem = type->expectRef<c10::ListType>().getElementType();
      if (elem->kind() == K::OptionalType) {
        elem = elem->expectRef<c10::OptionalType>().getElementType();
        t.optional_elements = true;
      }
      switch (elem->kind()) {
        case K::TensorType: t.base = B::kTensorList; break;
        case K::IntType: case K::SymIntType: t.base = B::kIntList; break;
        case K::FloatType: t.base = B::kFloatList; break;
        case K::BoolType: t.base = B::kBoolList; break;
        default: t.base = B::kOther; break;
      }
      break;
    }
    default: t.base = B::kOther; break;
  }
  return t;
}

std::optional<c10::ScalarType> C10ScalarType(program::ScalarType type) {
  using P = program::ScalarType;
  switch (type) {
    case P::kByte: return c10::kByte;
    case P::kChar: return c10::kChar;
    case P::kShort: return c10::kShort;
    case P::kInt: return c10::kInt;
    case P::kLong: return c10::kLong;
    case P::kHalf: return c10::kHalf;
    case P::kFloat: return c10::kFloat;
    case P::kDouble: return c10::kDouble;
    case P::kComplexHalf: return c10::kComplexHalf;
    case P::kComplexFloat: return c10::kComplexFloat;
    case P::kComplexDouble: return c10::kComplexDouble;
    case P::kBool: return c10::kBool;
    case P::kBFloat16: return c10::kBFloat16;
    case P::kUInt16: return c10::kUInt16;
    case P::kUInt32: return c10::kUInt32;
    case P::kUInt64: return c10::kUInt64;
    case P::kFloat8E4M3FN: return c10::kFloat8_e4m3fn;
    case P::kFloat8E5M2: return c10::kFloat8_e5m2;
    case P::kFloat8E4M3FNUZ: return c10::kFloat8_e4m3fnuz;
    case P::kFloat8E5M2FNUZ: return c10::kFloat8_e5m2fnuz;
    case P::kFloat8E8M0FNU: return c10::kFloat8_e8m0fnu;
    default: return std::nullopt;
  }
}

std::optional<c10::Layout> C10Layout(int schema_layout) {
  switch (schema_layout) {
    case 1: return c10::kSparse;
    case 2: return c10::kSparseCsr;
    case 3: return c10::kSparseCsc;
    case 4: return c10::kSparseBsr;
    case 5: return c10::kSparseBsc;
    case 6: return c10::kMkldnn;
    case 7: return c10::kStrided;
    default: return std::nullopt;
  }
}

std::optional<c10::MemoryFormat> C10MemoryFormat(int schema_format) {
  switch (schema_format) {
    case 1: return c10::MemoryFormat::Contiguous;
    case 2: return c10::MemoryFormat::ChannelsLast;
    case 3: return c10::MemoryFormat::ChannelsLast3d;
    case 4: return c10::MemoryFormat::Preserve;
    default: return std::nullopt;
  }
}

}  // namespace weft::interp
