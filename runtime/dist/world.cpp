#include "runtime/dist/world.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "runtime/dist/error.h"

namespace weft::dist {
namespace {

// Parses a decimal integer in [lo, hi]; throws naming the variable.
int ParseIntVar(const char* name, const char* value, long lo, long hi) {
  std::string v = value;
  bool digits = !v.empty() && v.size() <= 9 &&
                std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    throw DistError(std::string("environment variable ") + name + "=`" + v +
                    "` is not a non-negative integer");
  }
  long n = std::strtol(v.c_str(), nullptr, 10);
  if (n < lo || n > hi) {
    throw DistError(std::string("environment variable ") + name + "=" + v + " is out of range " +
                    std::to_string(lo) + ".." + std::to_string(hi));
  }
  return static_cast<int>(n);
}

const char* Required(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') {
    throw DistError(std::string("environment variable ") + name +
                    " is not set; a distributed rank needs RANK, WORLD_SIZE, MASTER_ADDR and "
                    "MASTER_PORT (set by torchrun or `weft-run --nproc N`; under srun, "
                    "SLURM_PROCID and SLURM_NTASKS stand in for RANK and WORLD_SIZE)");
  }
  return v;
}

}  // namespace

void ValidateWorld(const WorldConfig& w) {
  if (w.world_size < 1) {
    throw DistError("WORLD_SIZE=" + std::to_string(w.world_size) + " must be >= 1");
  }
  if (w.rank < 0 || w.rank >= w.world_size) {
    throw DistError("RANK=" + std::to_string(w.rank) + " must be < WORLD_SIZE=" +
                    std::to_string(w.world_size));
  }
  if (w.local_world_size < 1 || w.local_world_size > w.world_size) {
    throw DistError("LOCAL_WORLD_SIZE=" + std::to_string(w.local_world_size) +
                    " must be in 1..WORLD_SIZE=" + std::to_string(w.world_size));
  }
  if (w.local_rank < 0 || w.local_rank >= w.local_world_size) {
    throw DistError("LOCAL_RANK=" + std::to_string(w.local_rank) + " must be < LOCAL_WORLD_SIZE=" +
                    std::to_string(w.local_world_size));
  }
  if (w.master_addr.empty()) throw DistError("MASTER_ADDR is empty");
  if (w.master_port < 1 || w.master_port > 65535) {
    throw DistError("MASTER_PORT=" + std::to_string(w.master_port) + " is out of range 1..65535");
  }
}

WorldConfig WorldFromEnv(const std::function<const char*(const char*)>& getenv) {
  auto set = [&](const char* n) {
    const char* v = getenv(n);
    return v != nullptr && *v != '\0';
  };
  WorldConfig w;
  const bool slurm = !set("RANK") && !set("WORLD_SIZE") && set("SLURM_PROCID") && set("SLURM_NTASKS");
  if (slurm) {
    w.world_size = ParseIntVar("SLURM_NTASKS", getenv("SLURM_NTASKS"), 1, 1 << 20);
    w.rank = ParseIntVar("SLURM_PROCID", getenv("SLURM_PROCID"), 0, 1 << 20);
  } else {
    w.world_size = ParseIntVar("WORLD_SIZE", Required(getenv, "WORLD_SIZE"), 1, 1 << 20);
    w.rank = ParseIntVar("RANK", Required(getenv, "RANK"), 0, 1 << 20);
  }
  w.master_addr = Required(getenv, "MASTER_ADDR");
  w.master_port = ParseIntVar("MASTER_PORT", Required(getenv, "MASTER_PORT"), 1, 65535);
  if (set("LOCAL_RANK")) {
    w.local_rank = ParseIntVar("LOCAL_RANK", getenv("LOCAL_RANK"), 0, 1 << 20);
  } else if (slurm && set("SLURM_LOCALID")) {
    w.local_rank = ParseIntVar("SLURM_LOCALID", getenv("SLURM_LOCALID"), 0, 1 << 20);
  } else {
    w.local_rank = w.rank;
  }
  w.local_world_size = w.world_size;
  if (set("LOCAL_WORLD_SIZE")) {
    w.local_world_size = ParseIntVar("LOCAL_WORLD_SIZE", getenv("LOCAL_WORLD_SIZE"), 1, 1 << 20);
  } else if (slurm && set("SLURM_NTASKS_PER_NODE")) {
    std::string v = getenv("SLURM_NTASKS_PER_NODE");
    if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }) && v.size() <= 6) {
      w.local_world_size = std::max(1, std::stoi(v));
    }
  }
  if (set("TORCHELASTIC_USE_AGENT_STORE") && std::string(getenv("TORCHELASTIC_USE_AGENT_STORE")) == "True") {
    w.use_agent_store = true;
    const int attempt = set("TORCHELASTIC_RESTART_COUNT")
                            ? ParseIntVar("TORCHELASTIC_RESTART_COUNT", getenv("TORCHELASTIC_RESTART_COUNT"), 0, 1 << 20)
                            : 0;
    w.store_prefix = "weft-run/attempt_" + std::to_string(attempt) + "/";
  }
  if (w.rank == 0 && !w.use_agent_store && set("WEFT_MASTER_LISTEN_FD")) {
    const int fd = ParseIntVar("WEFT_MASTER_LISTEN_FD", getenv("WEFT_MASTER_LISTEN_FD"), 0, 1 << 20);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) w.master_listen_fd = fd;
  }
  ValidateWorld(w);
  return w;
}

WorldConfig WorldFromEnv() {
  return WorldFromEnv([](const char* n) { return std::getenv(n); });
}

bool LaunchedAsRank(const std::function<const char*(const char*)>& getenv) {
  if (getenv("RANK") != nullptr || getenv("WORLD_SIZE") != nullptr) return true;
  const char* procid = getenv("SLURM_PROCID");
  const char* ntasks = getenv("SLURM_NTASKS");
  return procid != nullptr && ntasks != nullptr && std::atoi(ntasks) > 1;
}

bool LaunchedAsRank() {
  return LaunchedAsRank([](const char* n) { return std::getenv(n); });
}

int DefaultThreadsPerRank(int local_world_size) {
  if (const char* t = std::getenv("WEFT_THREADS"); t != nullptr && *t != '\0') {
    return ParseIntVar("WEFT_THREADS", t, 1, 4096);
  }
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_world_size));
}

int FindFreePort(const std::string& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw DistError(std::string("socket(): ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    ::close(fd);
    throw DistError("cannot find a free port: `" + addr + "` is not an IPv4 address");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    int e = errno;
    ::close(fd);
    throw DistError("cannot bind " + addr + ":0 to find a free port: " + std::strerror(e));
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "?";
  std::string name = host;
  for (char& c : name) {
    if (c == '|') c = '_';
  }
  return name;
}

namespace {

// "4026531840": the inode of a namespace link, or "?" when it cannot be read.
std::string NamespaceInode(const char* link) {
  struct stat st {};
  return ::stat(link, &st) == 0 ? std::to_string(st.st_ino) : "?";
}

// The state letter of /proc/<pid>/stat ("pid (comm) S ..."; it follows the last ')'), or 0.
char ProcessStateLetter(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return 0;
  return line[close + 2];
}

}  // namespace

std::string HostIdentity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  struct stat shm {};
  const std::string shm_id =
      ::stat("/dev/shm", &shm) == 0 ? std::to_string(shm.st_dev) + ":" + std::to_string(shm.st_ino) : "?";
  return HostName() + "|" + boot_id + "|net:" + NamespaceInode("/proc/self/ns/net") +
         "|pid:" + NamespaceInode("/proc/self/ns/pid") + "|shm:" + shm_id;
}

bool ProcessGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const char state = ProcessStateLetter(pid);
  return state == 'Z' || state == 'X';
}

bool ProcessStopped(int pid) {
  if (pid <= 0) return false;
  const char state = ProcessStateLetter(pid);
  return state == 'T' || state == 't';
}

}  // namespace weft::dist
