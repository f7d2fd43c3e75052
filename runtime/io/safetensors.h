#pragma once

// Safetensors files (https://github.com/huggingface/safetensors format): an 8-byte
// little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}, ...,
// "__metadata__": {str: str}}, then the raw little-endian tensor bytes.
//
// The reader memory-maps the file and validates the whole header before anything is read:
// every offset lies inside the data section, every byte size equals numel x element size,
// no two tensors overlap. Tensors come back as views of the mapping (zero copy; the mapping
// lives as long as any view) or as copies converted to a requested dtype. Reading a slice
// touches only the pages of that slice, which is what a rank loading its shard needs.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace weft::io {

// Every problem with a safetensors file: the message names the file and, where there is one,
// the tensor key.
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the header says about one tensor.
struct TensorInfo {
  std::string name;
  std::string dtype;            // as written in the file: "F32", "BF16", ...
  at::ScalarType scalar_type;   // the matching torch dtype
  std::vector<int64_t> shape;
  uint64_t begin = 0;           // byte offsets into the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws SafetensorsError naming the file and the problem.
  static SafetensorsFile Open(const std::string& path);

  const std::string& path() const { return path_; }
  // Tensor names in file order of their data (ascending offsets).
  std::vector<std::string> Keys() const;
  bool Contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws SafetensorsError if `name` is absent (with the closest existing key as a hint).
  const TensorInfo& Info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // A read-only CPU view of the tensor's bytes in the mapping; no copy. Do not write to it.
  at::Tensor View(const std::string& name) const;
  // A contiguous copy converted to `dtype` (or the file's dtype).
  at::Tensor Load(const std::string& name, std::optional<at::ScalarType> dtype = std::nullopt) const;
  // A contiguous copy of [start, start + length) along `dim`, converted to `dtype`. Only
  // the slice's bytes are read. Throws if the range is outside the tensor.
  at::Tensor LoadSlice(const std::string& name, int64_t dim, int64_t start, int64_t length,
                       std::optional<at::ScalarType> dtype = std::nullopt) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  uint64_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (any device/layout; copied to contiguous CPU) to `path`, keys sorted,
// with optional string metadata. Throws SafetensorsError on I/O failure or an unsupported
// dtype.
void WriteSafetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The safetensors dtype name of a torch dtype, and back. Throw SafetensorsError if unknown.
std::string DtypeName(at::ScalarType type);
at::ScalarType ScalarTypeOf(const std::string& dtype_name);

}  // namespace weft::io
