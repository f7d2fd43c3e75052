#include "compiler/program/archive.h"

#include <zip.h>

#include <algorithm>
#include <cerrno>
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

std::string Archive::Read(std::string_view name) const {
  auto it = std::find(entries_.begin(), entries_.end(), name);
  if (it == entries_.end()) {
    throw ProgramError(path_ + ": no entry `" + root_ + std::string(name) + "` in the archive");
  }
  const zip_uint64_t index = handle_->index[it - entries_.begin()];
  const std::string where = path_ + ": entry `" + root_ + std::string(name) + "`";
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(handle_->zip, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
    throw ProgramError(where + ": cannot read its size");
  }
  zip_file_t* file = zip_fopen_index(handle_->zip, index, 0);
  if (file == nullptr) {
    throw ProgramError(where + ": cannot open: " + zip_error_strerror(zip_get_error(handle_->zip)));
  }
  std::string data(static_cast<size_t>(st.size), '\0');
  zip_uint64_t done = 0;
  while (done < st.size) {
    const zip_int64_t got = zip_fread(file, data.data() + done, st.size - done);
    if (got < 0) {
      std::string why = zip_file_strerror(file);
      zip_fclose(file);
      throw ProgramError(where + ": cannot read: " + why + " (is the file truncated or corrupted?)");
    }
    if (got == 0) break;
    done += static_cast<zip_uint64_t>(got);
  }
  // Reading past the end makes libzip compare the CRC of what was read with the directory's.
  char extra;
  const zip_int64_t tail = zip_fread(file, &extra, 1);
  const std::string tail_error = tail < 0 ? zip_file_strerror(file) : "";
  zip_fclose(file);
  if (done != st.size) {
    throw ProgramError(where + ": holds " + std::to_string(done) + " of its " + std::to_string(st.size) +
                       " bytes (the file is truncated)");
  }
  if (tail < 0) throw ProgramError(where + ": " + tail_error + " (the file is corrupted)");
  return data;
}

}  // namespace weft::program
