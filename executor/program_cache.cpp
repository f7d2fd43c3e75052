#include "executor/program_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/version.h>  // TORCH_VERSION only

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "compiler/source/sha256.h"
#include "executor/plan_loader.h"
#include "runtime/io/safetensors.h"

namespace weft::exec {
namespace fs = std::filesystem;

namespace {

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes `data` to `path` through a temporary file renamed into place (never a torn file).
bool WriteAtomically(const fs::path& path, const std::string& data) {
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << data;
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return !ec;
}

std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The project's Python: $WEFT_PYTHON, the one this build was configured with, else the
// checkout's .venv.
std::string Python() {
  if (const char* env = std::getenv("WEFT_PYTHON"); env != nullptr && *env != '\0') return env;
#ifdef WEFT_CONFIGURED_PYTHON
  if (std::string configured = WEFT_CONFIGURED_PYTHON; !configured.empty() && fs::exists(configured)) return configured;
#endif
  return DataDir() + "/.venv/bin/python";
}

// What the example inputs decide of an export: each tensor's name, dtype and shape, and the
// non-tensor arguments (not the values: the program is the same for any).
std::string InputsIdentity(const std::string& inputs) {
  const io::SafetensorsFile file = io::SafetensorsFile::Open(inputs);
  std::string id;
  for (const std::string& key : file.Keys()) {
    const io::TensorInfo& info = file.Info(key);
    id += key + ":" + info.dtype + "[";
    for (int64_t d : info.shape) id += std::to_string(d) + ",";
    id += "];";
  }
  for (const auto& [key, value] : file.metadata()) id += key + "=" + value + ";";
  return id;
}

std::string CacheKey(const ProgramSource& s) {
  std::string text = "weft.program-cache/1\n";
  text += "torch " TORCH_VERSION "\n";
  for (const char* tool : {"tools/export_program.py", "tools/diffusers_models.py"}) {
    text += std::string(tool) + " " + source::Sha256Hex(ReadFile(fs::path(DataDir()) / tool)) + "\n";
  }
  text += s.model_dir.empty() ? "config " + ReadFile(s.config_file) : "config.json " + ReadFile(fs::path(s.model_dir) / "config.json");
  text += "\ndtype " + s.dtype + "\nbatch " + std::to_string(s.batch) + "\n";
  text += s.inputs.empty() ? "workload " + s.workload : "inputs " + InputsIdentity(s.inputs);
  return source::Sha256Hex(text).substr(0, 32);
}

// Runs the export tool writing `out`; on failure throws with the tool's last lines.
double Export(const ProgramSource& s, const fs::path& out, bool progress) {
  std::string cmd = Quoted(Python()) + " " + Quoted(DataDir() + "/tools/export_program.py");
  cmd += s.model_dir.empty() ? " " + Quoted(s.config_file) : " --model-dir " + Quoted(s.model_dir);
  if (!s.inputs.empty()) cmd += " --inputs " + Quoted(s.inputs);
  if (s.inputs.empty() && !s.workload.empty()) cmd += " --workload " + Quoted(s.workload);
  cmd += " --batch " + std::to_string(s.batch) + " --dtype " + s.dtype + " -o " + Quoted(out.string());
  const fs::path log = out.string() + ".log";
  if (progress) std::fprintf(stderr, "weft-run: exporting the program once (tools/export_program.py) to %s\n", out.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system((cmd + " > " + Quoted(log.string()) + " 2>&1").c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (status == 0 && fs::exists(out)) {
    std::error_code ec;
    fs::remove(log, ec);
    return seconds;
  }
  std::deque<std::string> last;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (last.size() > 12) last.pop_front();
  }
  std::error_code ec;
  fs::remove(log, ec);
  fs::remove(out, ec);
  std::string why;
  for (const std::string& line : last) why += "\n  " + line;
  const std::string what = s.model_dir.empty() ? s.config_file : s.model_dir;
  throw std::runtime_error("cannot export a program for " + what + " (" + cmd + " exited with status " +
                           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) + "):" + why);
}

// An flock held for the object's lifetime.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace

std::string ProgramCacheDir() {
  if (const char* env = std::getenv("WEFT_PROGRAM_CACHE"); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "weft" / "programs").string();
  }
  const char* home = std::getenv("HOME");
  return (fs::path(home != nullptr ? home : "/tmp") / ".cache" / "weft" / "programs").string();
}

CachedProgram FindOrExportProgram(const ProgramSource& source, bool progress) {
  const std::string key = CacheKey(source);
  const fs::path dir = ProgramCacheDir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path program = dir / (key + ".pt2");
  const fs::path digest = dir / (key + ".pt2.sha256");
  FileLock lock(dir / (key + ".lock"));
  CachedProgram out;
  if (!lock.held()) {
    // Not writable: this run exports to a directory of its own.
    const fs::path tmp = fs::temp_directory_path() / ("weft-program-" + std::to_string(::getpid()));
    fs::create_directories(tmp, ec);
    std::fprintf(stderr, "weft-run: the program cache %s is not writable (%s); exporting to %s for this run only\n",
                 dir.c_str(), std::strerror(errno), tmp.c_str());
    out.path = (tmp / (key + ".pt2")).string();
    out.export_s = Export(source, out.path, progress);
    out.exported = true;
    return out;
  }
  out.path = program.string();
  if (fs::exists(program) && fs::exists(digest)) {
    const std::string want = ReadFile(digest);
    if (source::Sha256Hex(ReadFile(program)) == want) return out;
    std::fprintf(stderr, "weft-run: the cached program %s does not hash to its recorded SHA-256 (tampered or torn); "
                 "exporting it again\n", program.c_str());
  }
  fs::remove(digest, ec);
  const fs::path tmp = program.string() + ".tmp-" + std::to_string(::getpid());
  out.export_s = Export(source, tmp, progress);
  out.exported = true;
  const std::string hash = source::Sha256Hex(ReadFile(tmp));
  fs::rename(tmp, program, ec);
  if (ec || !WriteAtomically(digest, hash)) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write the program cache entry " + program.string());
  }
  if (progress) std::fprintf(stderr, "weft-run: exported in %.1f s; later runs reuse %s\n", out.export_s, program.c_str());
  return out;
}

}  // namespace weft::exec
