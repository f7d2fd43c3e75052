#include "compiler/program/archive.h"

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

namespace weft::program {

struct Archive::Handle {
  zip_t* zip = nullptr;
  std::vector<zip_uint64_t> index;  // entries_[i] -> zip index
  ~Handle() {
    if (zip != nullptr) zip_discard(zip);
  }
};

namespace {

std::string ZipOpenError(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

}  // namespace

Archive::Archive(std::string path, std::shared_ptr<Handle> handle)
    : path_(std::move(path)), handle_(std::move(handle)) {}

Archive Archive::Open(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw ProgramError(path + ": cannot open the program: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw ProgramError(path + ": not a program file (not a regular file)");
  int code = 0;
  // ZIP_CHECKCONS: the central directory must agree with the local headers, which catches a
  // file cut short after the directory was written.
  zip_t* zip = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (zip == nullptr) {
    std::string why = ZipOpenError(code);
    if (code == ZIP_ER_NOZIP) why = "not a zip archive (a .pt2 program is one; is the file truncated?)";
    throw ProgramError(path + ": cannot read the program: " + why);
  }
  auto handle = std::make_shared<Handle>();
  handle->zip = zip;
  Archive archive(path, handle);
  archive.file_size_ = static_cast<uint64_t>(st.st_size);
  const zip_int64_t n = zip_get_num_entries(zip, 0);
  std::string root;
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(zip, static_cast<zip_uint64_t>(i), 0);
    if (name == nullptr) continue;
    std::string full = name;
    if (!full.empty() && full.back() == '/') continue;  // a directory entry
    const size_t slash = full.find('/');
    if (slash == std::string::npos) {
      throw ProgramError(path + ": entry `" + full + "` is not under a root folder (not a torch.export archive)");
    }
    const std::string top = full.substr(0, slash + 1);
    if (root.empty()) root = top;
    if (top != root) {
      throw ProgramError(path + ": entries under two root folders (`" + root + "`, `" + top +
                         "`); a torch.export archive has one");
    }
    archive.entries_.push_back(full.substr(slash + 1));
    handle->index.push_back(static_cast<zip_uint64_t>(i));
  }
  if (root.empty()) throw ProgramError(path + ": the archive is empty");
  archive.root_ = root;
  return archive;
}

bool Archive::Has(std::string_view name) const {
  return std::find(entries_.begin(), entries_.end(), name) != entries_.end();
}

int64_t Archive::Size(std::string_view name) const {
  auto it = std::find(entries_.begin(), entries_.end(), name);
  if (it == entries_.end()) return -1;
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(handle_->zip, handle_->index[it - entries_.begin()], 0, &st) != 0) return -1;
  return static_cast<int64_t>(st.size);
}

int64_t MaxMetadataBytes() {
  if (const char* env = std::getenv("WEFT_PROGRAM_MAX_JSON_BYTES"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (end == env || *end != '\0' || v <= 0) {
      throw ProgramError(std::string("WEFT_PROGRAM_MAX_JSON_BYTES=`") + env + "` is not a positive number of bytes");
    }
    return v;
  }
  return kDefaultMaxMetadataBytes;
}

namespace {

// Metadata (the graph, indexes, manifest) is read into memory and parsed; data entries (tensor
// bytes) are as large as the tensors they hold.
bool IsMetadata(std::string_view name) {
  return name.size() >= 5 && name.substr(name.size() - 5) == ".json";
}

// Deflate cannot expand data more than 1032-fold; allow for headers.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kReadChunk = uint64_t{16} << 20;

std::string Mib(uint64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

std::string Archive::Read(std::string_view name) const {
  auto it = std::find(entries_.begin(), entries_.end(), name);
  if (it == entries_.end()) {
    throw ProgramError(path_ + ": no entry `" + root_ + std::string(name) + "` in the archive");
  }
  const zip_uint64_t index = handle_->index[it - entries_.begin()];
  const std::string where = path_ + ": entry `" + root_ + std::string(name) + "`";
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(handle_->zip, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
      !(st.valid & ZIP_STAT_COMP_SIZE)) {
    throw ProgramError(where + ": cannot read its size");
  }
  // What the directory declares is checked before anything is allocated: the compressed bytes
  // must be in the file, and what they inflate to within what deflate can give and what weft
  // reads of metadata.
  if (st.comp_size > file_size_) {
    throw ProgramError(where + ": declares " + std::to_string(st.comp_size) + " compressed bytes, but the file holds " +
                       std::to_string(file_size_) + " (the file is truncated)");
  }
  const bool stored = (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE;
  if ((stored && st.size != st.comp_size) || (!stored && st.size > st.comp_size * kMaxDeflateRatio + 1024)) {
    throw ProgramError(where + ": declares " + std::to_string(st.size) + " bytes from " + std::to_string(st.comp_size) +
                       (stored ? " stored bytes" : " compressed bytes, more than deflate can give") +
                       " (the archive's directory is corrupted)");
  }
  if (IsMetadata(name)) {
    const int64_t cap = MaxMetadataBytes();
    if (st.size > static_cast<uint64_t>(cap)) {
      throw ProgramError(where + " inflates to " + Mib(st.size) + ", more than the " + Mib(cap) +
                         " weft reads of a program's metadata (reading costs about 12 bytes of memory per byte; "
                         "WEFT_PROGRAM_MAX_JSON_BYTES raises the limit)");
    }
  }
  zip_file_t* file = zip_fopen_index(handle_->zip, index, 0);
  if (file == nullptr) {
    throw ProgramError(where + ": cannot open: " + zip_error_strerror(zip_get_error(handle_->zip)));
  }
  // Grown as data arrives, so a size the directory overstates costs no more than the real data.
  std::string data;
  zip_uint64_t done = 0;
  while (done < st.size) {
    const zip_uint64_t want = std::min<zip_uint64_t>(kReadChunk, st.size - done);
    data.resize(static_cast<size_t>(done + want));
    const zip_int64_t got = zip_fread(file, data.data() + done, want);
    if (got < 0) {
      std::string why = zip_file_strerror(file);
      zip_fclose(file);
      throw ProgramError(where + ": cannot read: " + why + " (is the file truncated or corrupted?)");
    }
    done += static_cast<zip_uint64_t>(got);
    if (got == 0) break;
  }
  data.resize(static_cast<size_t>(done));
  // Reading past the end makes libzip compare the CRC of what was read with the directory's.
  char extra;
  const zip_int64_t tail = zip_fread(file, &extra, 1);
  const std::string tail_error = tail < 0 ? zip_file_strerror(file) : "";
  zip_fclose(file);
  if (done != st.size) {
    throw ProgramError(where + ": holds " + std::to_string(done) + " of its " + std::to_string(st.size) +
                       " bytes (the file is truncated)");
  }
  if (tail > 0) throw ProgramError(where + ": inflates to more than the " + std::to_string(st.size) + " bytes it declares (the file is corrupted)");
  if (tail < 0) throw ProgramError(where + ": " + tail_error + " (the file is corrupted)");
  return data;
}

}  // namespace weft::program
