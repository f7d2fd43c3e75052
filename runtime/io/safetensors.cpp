#include "runtime/io/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace weft::io {
namespace {

// A header larger than this is not a real checkpoint header but a corrupt length field;
// refusing it early avoids mapping garbage as JSON.
constexpr uint64_t kMaxHeaderBytes = uint64_t{256} << 20;

struct DtypeEntry {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeEntry kDtypes[] = {
    {"F64", at::kDouble},  {"F32", at::kFloat},     {"F16", at::kHalf},
    {"BF16", at::kBFloat16}, {"I64", at::kLong},    {"I32", at::kInt},
    {"I16", at::kShort},   {"I8", at::kChar},       {"U8", at::kByte},
    {"BOOL", at::kBool},   {"F8_E4M3", at::kFloat8_e4m3fn}, {"F8_E5M2", at::kFloat8_e5m2},
};

[[noreturn]] void Fail(const std::string& path, const std::string& message) {
  throw SafetensorsError(path + ": " + message);
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string DtypeName(at::ScalarType type) {
  for (const DtypeEntry& entry : kDtypes) {
    if (entry.type == type) return entry.name;
  }
  throw SafetensorsError(std::string("dtype ") + c10::toString(type) + " has no safetensors name");
}

at::ScalarType ScalarTypeOf(const std::string& dtype_name) {
  for (const DtypeEntry& entry : kDtypes) {
    if (dtype_name == entry.name) return entry.type;
  }
  throw SafetensorsError("unknown safetensors dtype `" + dtype_name + "`");
}

// The read-only mapping of a whole file; unmapped when the last view of it goes away.
struct SafetensorsFile::Mapping {
  void* address = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (address != nullptr) munmap(address, size);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(address); }
};

SafetensorsFile SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    Fail(path, std::string("cannot stat: ") + std::strerror(err));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = static_cast<uint64_t>(st.st_size);
  if (mapping->size < 8) {
    close(fd);
    Fail(path, "file is " + std::to_string(mapping->size) +
                   " bytes, too short for the 8-byte header length (truncated?)");
  }
  mapping->address = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (mapping->address == MAP_FAILED) {
    mapping->address = nullptr;
    Fail(path, std::string("cannot map: ") + std::strerror(errno));
  }
  file.mapping_ = mapping;

  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | mapping->bytes()[i];
  if (header_bytes > kMaxHeaderBytes || header_bytes > mapping->size - 8) {
    Fail(path, "header length field says " + std::to_string(header_bytes) + " bytes but the file has " +
                   std::to_string(mapping->size - 8) + " bytes after it (truncated or not a safetensors file)");
  }
  file.data_offset_ = 8 + header_bytes;
  const uint64_t data_bytes = mapping->size - file.data_offset_;

  const char* header_text = reinterpret_cast<const char*>(mapping->bytes() + 8);
  nlohmann::json header = nlohmann::json::parse(header_text, header_text + header_bytes, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    Fail(path, "header is not a JSON object");
  }
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    if (key == "__metadata__") {
      if (!it->is_object()) Fail(path, "`__metadata__` must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) Fail(path, "`__metadata__." + m.key() + "` must be a string");
        file.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const nlohmann::json& entry = *it;
    auto where = [&](const std::string& what) { Fail(path, "tensor `" + key + "`: " + what); };
    if (!entry.is_object()) where("header entry is not an object");
    for (auto f = entry.begin(); f != entry.end(); ++f) {
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets") {
        where("unknown header field `" + f.key() + "`");
      }
    }
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) where("missing string field `dtype`");
    if (!entry.contains("shape") || !entry["shape"].is_array()) where("missing array field `shape`");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      where("missing field `data_offsets` = [begin, end]");
    }
    TensorInfo info;
    info.name = key;
    info.dtype = entry["dtype"].get<std::string>();
    try {
      info.scalar_type = ScalarTypeOf(info.dtype);
    } catch (const SafetensorsError& e) {
      where(e.what());
    }
    uint64_t numel = 1;
    for (const nlohmann::json& d : entry["shape"]) {
      if (!d.is_number_unsigned()) where("shape entries must be non-negative integers");
      uint64_t extent = d.get<uint64_t>();
      if (extent != 0 && numel > UINT64_MAX / extent) where("shape overflows");
      numel *= extent;
      info.shape.push_back(static_cast<int64_t>(extent));
    }
    for (const nlohmann::json& o : entry["data_offsets"]) {
      if (!o.is_number_unsigned()) where("data_offsets must be non-negative integers");
    }
    info.begin = entry["data_offsets"][0].get<uint64_t>();
    info.end = entry["data_offsets"][1].get<uint64_t>();
    if (info.begin > info.end) {
      where("data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) + "] are reversed");
    }
    if (info.end > data_bytes) {
      where("data_offsets end " + std::to_string(info.end) + " lies past the data section (" +
            std::to_string(data_bytes) + " bytes; truncated file?)");
    }
    const uint64_t expected = numel * c10::elementSize(info.scalar_type);
    if (info.end - info.begin != expected) {
      where("holds " + std::to_string(info.end - info.begin) + " bytes but " + info.dtype + " shape needs " +
            std::to_string(expected));
    }
    file.tensors_.push_back(std::move(info));
  }
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  for (size_t i = 0; i < file.tensors_.size(); ++i) {
    if (i > 0 && file.tensors_[i].begin < file.tensors_[i - 1].end) {
      Fail(path, "tensors `" + file.tensors_[i - 1].name + "` and `" + file.tensors_[i].name + "` overlap");
    }
    file.index_[file.tensors_[i].name] = i;
  }
  return file;
}

std::vector<std::string> SafetensorsFile::Keys() const {
  std::vector<std::string> keys;
  keys.reserve(tensors_.size());
  for (const TensorInfo& info : tensors_) keys.push_back(info.name);
  return keys;
}

const TensorInfo& SafetensorsFile::Info(const std::string& name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return tensors_[it->second];
  std::string hint;
  size_t best = SIZE_MAX;
  for (const TensorInfo& info : tensors_) {
    size_t distance = EditDistance(name, info.name);
    if (distance < best) {
      best = distance;
      hint = info.name;
    }
  }
  std::string message = "no tensor `" + name + "` (" + std::to_string(tensors_.size()) + " tensors in file)";
  if (!hint.empty() && best <= std::max<size_t>(3, name.size() / 4)) message += "; did you mean `" + hint + "`?";
  Fail(path_, message);
}

at::Tensor SafetensorsFile::View(const std::string& name) const {
  const TensorInfo& info = Info(name);
  void* data = const_cast<uint8_t*>(mapping_->bytes() + data_offset_ + info.begin);
  // The deleter owns a reference to the mapping, so the view keeps the file mapped.
  std::shared_ptr<Mapping> keep = mapping_;
  return at::from_blob(data, info.shape, [keep](void*) mutable { keep.reset(); },
                       at::TensorOptions().dtype(info.scalar_type));
}

at::Tensor SafetensorsFile::Load(const std::string& name, std::optional<at::ScalarType> dtype) const {
  at::Tensor view = View(name);
  return view.to(dtype.value_or(view.scalar_type()), /*non_blocking=*/false, /*copy=*/true).contiguous();
}

at::Tensor SafetensorsFile::LoadSlice(const std::string& name, int64_t dim, int64_t start, int64_t length,
                                      std::optional<at::ScalarType> dtype) const {
  const TensorInfo& info = Info(name);
  const int64_t rank = static_cast<int64_t>(info.shape.size());
  if (dim < 0 || dim >= rank) {
    Fail(path_, "tensor `" + name + "`: slice dim " + std::to_string(dim) + " but the tensor has rank " +
                    std::to_string(rank));
  }
  if (start < 0 || length < 0 || start + length > info.shape[dim]) {
    Fail(path_, "tensor `" + name + "`: slice [" + std::to_string(start) + ", " + std::to_string(start + length) +
                    ") of dim " + std::to_string(dim) + " is outside its extent " + std::to_string(info.shape[dim]));
  }
  at::Tensor slice = View(name).narrow(dim, start, length);
  return slice.to(dtype.value_or(slice.scalar_type()), false, /*copy=*/true).contiguous();
}

void WriteSafetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> payloads;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__") throw SafetensorsError(path + ": `__metadata__` cannot name a tensor");
    at::Tensor data = tensor.detach().to(at::kCPU).contiguous();
    std::vector<int64_t> shape(data.sizes().begin(), data.sizes().end());
    const uint64_t bytes = static_cast<uint64_t>(data.numel()) * data.element_size();
    header[name] = {{"dtype", DtypeName(data.scalar_type())},
                    {"shape", shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    payloads.push_back(std::move(data));
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - (text.size() % 8)) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw SafetensorsError(path + ": cannot open for writing: " + std::strerror(errno));
  uint8_t length[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const at::Tensor& data : payloads) {
    out.write(static_cast<const char*>(data.data_ptr()), static_cast<std::streamsize>(data.numel() * data.element_size()));
  }
  out.close();
  if (!out) throw SafetensorsError(path + ": write failed (disk full?)");
}

}  // namespace weft::io
