#pragma once

// A `.pt2` archive as torch.export.save writes it: a zip whose entries all sit under one root
// folder (the file's stem, or "archive" when written to a buffer). Read with libzip; every
// entry is checked against its CRC as it is read, so a truncated or corrupted archive fails
// with the entry named instead of yielding bad bytes.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace weft::program {

// A program that cannot be read or used. The message names the file and, where there is one,
// the entry, node, key or argument.
class ProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How large a metadata entry (`*.json`: the graph, the weights index, the manifest) may inflate
// to. Reading a program costs about 12 bytes of memory per byte of its graph; real exports are
// 1-8 MB (Flux.1-dev: 7.9 MB, 5,735 nodes), so 256 MiB (~3 GB to read) leaves 30x headroom and
// refuses a million-node or zip-bomb graph before inflating it. WEFT_PROGRAM_MAX_JSON_BYTES
// overrides it.
inline constexpr int64_t kDefaultMaxMetadataBytes = int64_t{256} << 20;
int64_t MaxMetadataBytes();

class Archive {
 public:
  // Opens `path`. Throws ProgramError when the file is missing, not a zip, truncated, or holds
  // no single root folder.
  static Archive Open(const std::string& path);

  const std::string& path() const { return path_; }
  // The root folder every entry is under, with its trailing '/'.
  const std::string& root() const { return root_; }
  // Entry names relative to the root, in archive order.
  const std::vector<std::string>& entries() const { return entries_; }
  bool Has(std::string_view name) const;
  // The bytes of entry `name` (relative to the root). Throws ProgramError when it is absent or
  // cannot be read whole (bad CRC, truncated data), and -- before allocating -- when its declared
  // size is impossible (more compressed bytes than the file holds, more than deflate can give)
  // or, for metadata, over MaxMetadataBytes(). Memory grows with the data actually inflated.
  std::string Read(std::string_view name) const;
  // The uncompressed size of entry `name`, or -1 when absent.
  int64_t Size(std::string_view name) const;

 private:
  struct Handle;
  Archive(std::string path, std::shared_ptr<Handle> handle);

  std::string path_;
  std::shared_ptr<Handle> handle_;
  std::string root_;
  std::vector<std::string> entries_;
  uint64_t file_size_ = 0;
};

}  // namespace weft::program
